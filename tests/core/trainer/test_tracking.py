"""Metrics sinks: JSON lines per step, truncation on resume."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hfsdk.core.trainer.tracking import Tracker, read_metrics


def test_jsonl_lines_and_resume_truncation(tmp_path: Path) -> None:
    tracker = Tracker(tmp_path, ("jsonl",), total_steps=4)
    for step in (1, 2, 3):
        tracker.log(step, {"reward/mean": step / 10, "actor/kl": math.nan})
    tracker.close()
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[1]["reward/mean"] == 0.2 and rows[0]["actor/kl"] is None

    # resuming from the step-2 checkpoint drops step 3, which will be redone
    tracker = Tracker(tmp_path, ("jsonl",), total_steps=4, start_step=2)
    tracker.log(3, {"reward/mean": 0.9})
    tracker.close()
    assert [(r["step"], r["reward/mean"]) for r in read_metrics(tmp_path)] == [
        (1, 0.1),
        (2, 0.2),
        (3, 0.9),
    ]


def test_console_only_writes_no_file(tmp_path: Path) -> None:
    tracker = Tracker(tmp_path, ("console",), total_steps=1, quiet=True)
    tracker.log(1, {"reward/mean": 1.0})
    tracker.close()
    assert not (tmp_path / "metrics.jsonl").exists()


def test_missing_optional_logger_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import importlib.util

    import pytest

    from hfsdk.core.errors import HfsdkError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(HfsdkError, match=r"asks for wandb, which is not installed; pip install"):
        Tracker(tmp_path, ("wandb",), total_steps=1)


def test_a_half_written_last_line_is_skipped_and_repaired(tmp_path: Path) -> None:
    tracker = Tracker(tmp_path, ("jsonl",), total_steps=4)
    for step in (1, 2):
        tracker.log(step, {"reward/mean": step / 10})
    tracker.close()
    path = tmp_path / "metrics.jsonl"
    path.write_text(path.read_text() + '{"step": 3, "reward/me')  # killed mid-write
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]
    # resuming from step 2 rewrites the file without the damaged line
    Tracker(tmp_path, ("jsonl",), total_steps=4, start_step=2).close()
    assert path.read_text().count("\n") == 2 and path.read_text().endswith("}\n")


def test_resume_leaves_one_line_per_step(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = [1, 2, 3, 2, 3, 4, 5]  # two runs on one directory (the old lock-less race)
    path.write_text("".join(f'{{"step": {s}, "x": {i}}}\n' for i, s in enumerate(lines)))
    Tracker(tmp_path, ("jsonl",), total_steps=9, start_step=4).close()
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["x"] for r in rows] == [0, 3, 4, 5]  # the last copy of a repeated step wins


def test_validation_samples_reach_tensorboard_as_a_table(tmp_path) -> None:
    from hfsdk.core.trainer.tracking import Tracker

    texts: list[tuple[str, str, int]] = []

    class FakeWriter:
        def add_text(self, tag: str, text: str, step: int) -> None:
            texts.append((tag, text, step))

    tracker = Tracker(tmp_path, ("jsonl",), total_steps=1, quiet=True)
    tracker._tb = FakeWriter()  # what trainer.loggers=[tensorboard] would open
    tracker.log_samples(3, [{"prompt": "1 + 2 =", "response": "3 | ok\nmore", "score": 1.0}])
    [(tag, text, step)] = texts
    assert (tag, step) == ("val/samples", 3)
    assert text.splitlines()[2] == "| 1 + 2 = | 3 \\| ok more | 1.0 |"
    tracker._tb = None
    tracker.close()


def test_tensorboard_drops_what_a_crashed_run_logged_after_its_checkpoint(
    tmp_path: Path,
) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tracker = Tracker(tmp_path, ("tensorboard",), total_steps=4)
    for step in (1, 2, 3, 4):
        tracker.log(step, {"reward/mean": float(step)})
    tracker.close()  # crashed after step 4; the last checkpoint was step 2
    tracker = Tracker(tmp_path, ("tensorboard",), total_steps=4, start_step=2)
    for step in (3, 4):
        tracker.log(step, {"reward/mean": 10.0 * step})
    tracker.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    # Without purge_step TensorBoard shows steps 3 and 4 twice (3, 4, 3, 4).
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [
        (1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0),
    ]  # fmt: skip


def test_wandb_takes_its_settings_from_config_and_env_and_resumes_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    from hfsdk.core.trainer.tracking import WANDB_ID_FILE
    from hfsdk.core.trainer.trainer_config import WandbConfig

    # Offline mode from the environment: no network. Project from the config beats the env's.
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "from_env")
    monkeypatch.setenv("WANDB_ENTITY", "team_env")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    monkeypatch.delenv("WANDB_NAME", raising=False)
    settings = WandbConfig(project="from_config", name="grpo-1")
    tracker = Tracker(tmp_path, ("wandb",), total_steps=4, wandb=settings, config={"lr": 1e-6})
    run = tracker._wandb
    assert (run.project, run.name, run.settings.mode) == ("from_config", "grpo-1", "offline")
    assert run.entity == "team_env"
    run_id = (tmp_path / WANDB_ID_FILE).read_text().strip()
    assert run.id == run_id and len(run_id) == 8
    tracker.log(1, {"reward/mean": 0.5})
    tracker.close()
    # A restart in the same run directory resumes that wandb run (resume="allow").
    tracker = Tracker(tmp_path, ("wandb",), total_steps=4, start_step=1, wandb=settings)
    assert tracker._wandb.id == run_id and tracker._wandb.project == "from_config"
    tracker.close()
    runs = sorted(p.name for p in (tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and all(name.split("-")[3] == run_id for name in runs)
    # Project and mode from the environment alone; the name defaults to the run directory.
    other = tmp_path / "second"
    tracker = Tracker(other, ("wandb",), total_steps=1)
    assert (tracker._wandb.project, tracker._wandb.name) == ("from_env", "second")
    assert tracker._wandb.id != run_id
    tracker.close()


@pytest.mark.slow
def test_a_resumed_training_run_continues_its_wandb_run_and_tensorboard_curve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.tracking import WANDB_ID_FILE
    from hfsdk.core.trainer.trainer import Trainer

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    small = [
        "data.batch_size=4", "algorithm.n_samples_per_prompt=2", "actor.mini_batch_size=4",
        "actor.micro_batch_size=8", "trainer.loggers=[jsonl, wandb, tensorboard]",
        "trainer.wandb.project=hfsdk-test",
    ]  # fmt: skip
    run_dir = tmp_path / "run"
    Trainer(load_run_config("grpo", None, [*small, "trainer.total_steps=1"]), run_dir,
            quiet=True).fit()  # fmt: skip
    run_id = (run_dir / WANDB_ID_FILE).read_text().strip()
    rows = Trainer(load_run_config("grpo", None, [*small, "trainer.total_steps=2"]), run_dir,
                   quiet=True).fit()  # fmt: skip
    assert [r["step"] for r in rows] == [1, 2]
    assert (run_dir / WANDB_ID_FILE).read_text().strip() == run_id
    runs = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and all(r.name.split("-")[3] == run_id for r in runs)
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("reward/mean")] == [1, 2]
