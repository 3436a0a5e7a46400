"""The tensorboard and wandb sinks: settings, resumption, validation tables, missing packages."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hfsdk_tracking.sinks import WANDB_ID_FILE, TensorboardSink, WandbConfig, WandbSink

from hfsdk import HfsdkError, get_registry, load_run_config


def test_the_plugin_registers_both_sinks_and_the_wandb_section() -> None:
    assert {"tensorboard", "wandb"} <= set(get_registry("trackers"))
    config = load_run_config("grpo", None, ["trainer.wandb.project=old_place"])
    assert config.sections["wandb"] == WandbConfig(project="old_place")  # trainer.wandb still reads
    both = ["trainer.wandb.project=old", "trainer.wandb.name=kept", "wandb.project=new"]
    config = load_run_config("grpo", None, both)  # an old run's config.yaml, a new override
    assert config.wandb == WandbConfig(project="new", name="kept")
    config = load_run_config("grpo", None, ["wandb.mode=offline", "trainer.loggers=[wandb]"])
    assert config.wandb.mode == "offline" and config.trainer.loggers == ("wandb",)


def test_missing_optional_logger_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(HfsdkError, match=r"asks for wandb, which is not installed; pip install"):
        WandbSink.open(run_dir=tmp_path)
    # At preflight, before any worker starts (it stopped the run after start-up, over the
    # bar); reading the config alone (config show, export, replay) needs no sink.
    from hfsdk_tracking.sinks import sink_packages_check

    config = load_run_config("grpo", None, ["trainer.loggers=[jsonl,wandb]"])
    with pytest.raises(HfsdkError, match=r"asks for wandb, which is not installed; pip install"):
        sink_packages_check(config, None, None)
    sink_packages_check(
        load_run_config("grpo", None, ["trainer.loggers=[tensorboard]"]), None, None
    )


def test_validation_samples_reach_tensorboard_as_a_table() -> None:
    texts: list[tuple[str, str, int]] = []

    class FakeWriter:
        def add_text(self, tag: str, text: str, step: int) -> None:
            texts.append((tag, text, step))

    sink = TensorboardSink(FakeWriter())  # what trainer.loggers=[tensorboard] would open
    sink.log_samples(3, [{"prompt": "1 + 2 =", "response": "3 | ok\nmore", "score": 1.0}])
    [(tag, text, step)] = texts
    assert (tag, step) == ("val/samples", 3)
    assert text.splitlines()[2] == "| 1 + 2 = | 3 \\| ok more | 1.0 |"


def test_tensorboard_drops_what_a_crashed_run_logged_after_its_checkpoint(
    tmp_path: Path,
) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sink = TensorboardSink.open(run_dir=tmp_path)
    for step in (1, 2, 3, 4):
        sink.log(step, {"reward/mean": float(step)})
    sink.close()  # crashed after step 4; the last checkpoint was step 2
    sink = TensorboardSink.open(run_dir=tmp_path, start_step=2)
    for step in (3, 4):
        sink.log(step, {"reward/mean": 10.0 * step})
    sink.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    # Without purge_step TensorBoard shows steps 3 and 4 twice (3, 4, 3, 4).
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [
        (1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0),
    ]  # fmt: skip
    # Crashed before its first checkpoint, then started afresh in the same directory: the
    # dead run's steps went on showing beside the new run's.
    sink = TensorboardSink.open(run_dir=tmp_path, start_step=0)
    for step in (0, 1):
        sink.log(step, {"reward/mean": 100.0 + step})
    sink.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [(0, 100.0), (1, 101.0)]


def test_tensorboard_keeps_every_step_logged_before_a_kill_9(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    import signal
    import subprocess
    import sys

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # SummaryWriter wrote every flush_secs (120 s) or on close: a kill -9 lost every step
    # since, and the resumed run's purge_step made the loss permanent.
    child = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from hfsdk_tracking.sinks import TensorboardSink\n"
        "sink = TensorboardSink.open(run_dir=Path(sys.argv[1]))\n"
        "for step in (1, 2, 3):\n"
        "    sink.log(step, {'reward/mean': float(step)})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(tmp_path)], timeout=60)
    assert done.returncode == -signal.SIGKILL
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert events.Tags()["scalars"] == ["reward/mean"], "no step reached the event file"
    assert [e.step for e in events.Scalars("reward/mean")] == [1, 2, 3]


def test_wandb_settings_without_the_wandb_logger_are_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from hfsdk_tracking.sinks import sink_packages_check

    # Before: accepted, and no wandb run was started, without a word.
    config = load_run_config("grpo", None, ["wandb.project=myproj"])
    with caplog.at_level(logging.WARNING, logger="hfsdk_tracking.sinks"):
        sink_packages_check(config, None, None)
    assert [r.getMessage() for r in caplog.records] == [
        "wandb.project='myproj' is set but trainer.loggers (console, jsonl) has no wandb, so "
        "nothing is sent to wandb; add wandb to trainer.loggers to log there"
    ]
    caplog.clear()
    # wandb's defaults (a run dir's config.yaml writes them) and a run with the logger: quiet.
    for overrides in (
        ["trainer.loggers=[tensorboard]"],
        ["trainer.loggers=[jsonl,wandb]", "wandb.mode=offline"],
    ):
        with caplog.at_level(logging.WARNING, logger="hfsdk_tracking.sinks"):
            sink_packages_check(load_run_config("grpo", None, overrides), None, None)
    assert not caplog.records


def test_a_wandb_mode_env_typo_is_refused_at_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    from hfsdk_tracking.sinks import sink_packages_check

    # Before: wandb refused it after the workers started, in a cut-off multi-line message.
    config = load_run_config("grpo", None, ["trainer.loggers=[jsonl,wandb]"])
    monkeypatch.setenv("WANDB_MODE", "offlin")
    message = r"^WANDB_MODE='offlin' is not a wandb mode; expected one of online, offline, "
    with pytest.raises(HfsdkError, match=message):
        sink_packages_check(config, None, None)
    with pytest.raises(HfsdkError, match=message):  # wandb refuses it even with wandb.mode set
        sink_packages_check(
            load_run_config("grpo", None, ["trainer.loggers=[wandb]", "wandb.mode=offline"]),
            None,
            None,
        )
    # A run without wandb does not read it; every mode wandb accepts passes.
    sink_packages_check(load_run_config("grpo", None, ["trainer.loggers=[jsonl]"]), None, None)
    from hfsdk_tracking.sinks import WANDB_MODES

    for mode in WANDB_MODES:
        monkeypatch.setenv("WANDB_MODE", mode)
        sink_packages_check(config, None, None)


def test_the_wandb_modes_are_those_the_installed_wandb_accepts() -> None:
    import typing

    pytest.importorskip("wandb")
    from hfsdk_tracking.sinks import WANDB_MODES
    from wandb.sdk.wandb_settings import Settings

    assert set(WANDB_MODES) == set(typing.get_args(Settings.model_fields["mode"].annotation))


def test_a_wandb_mode_typo_lists_the_modes() -> None:
    # Before: "expected Optional" (a Literal or None was not described).
    with pytest.raises(HfsdkError, match=r"'wandb.mode'; expected one of 'online', .*, or null$"):
        load_run_config("grpo", None, ["wandb.mode=ofline"])


def test_a_run_dir_of_dot_names_the_wandb_run_after_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wandb = pytest.importorskip("wandb")
    from hfsdk_tracking.sinks import start_wandb

    # `hfsdk run --run-dir .` keeps Path("."), whose name is "": wandb picked a random name.
    started: dict[str, object] = {}
    monkeypatch.setattr(wandb, "init", lambda **kwargs: started.update(kwargs))
    monkeypatch.delenv("WANDB_NAME", raising=False)
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    (tmp_path / "x").mkdir()
    monkeypatch.chdir(tmp_path / "x")
    start_wandb(Path("."), WandbConfig(), {})
    assert started["name"] == "x"


def test_wandb_takes_its_settings_from_config_and_env_and_resumes_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    # Offline mode from the environment: no network. Project from the config beats the env's.
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "from_env")
    monkeypatch.setenv("WANDB_ENTITY", "team_env")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    monkeypatch.delenv("WANDB_NAME", raising=False)
    config = load_run_config("grpo", None, ["wandb.project=from_config", "wandb.name=grpo-1"])
    sink = WandbSink.open(run_dir=tmp_path, config=config)
    run = sink._wandb
    assert (run.project, run.name, run.settings.mode) == ("from_config", "grpo-1", "offline")
    assert run.entity == "team_env"
    run_id = (tmp_path / WANDB_ID_FILE).read_text().strip()
    assert run.id == run_id and len(run_id) == 8
    sink.log(1, {"reward/mean": 0.5})
    sink.close()
    # A restart in the same run directory resumes that wandb run (resume="allow").
    sink = WandbSink.open(run_dir=tmp_path, config=config, start_step=1)
    assert sink._wandb.id == run_id and sink._wandb.project == "from_config"
    sink.close()
    runs = sorted(p.name for p in (tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and all(name.split("-")[3] == run_id for name in runs)
    # Project and mode from the environment alone; the name defaults to the run directory.
    other = tmp_path / "second"
    sink = WandbSink.open(run_dir=other)
    assert (sink._wandb.project, sink._wandb.name) == ("from_env", "second")
    assert sink._wandb.id != run_id
    sink.close()


@pytest.mark.slow
def test_a_resumed_training_run_continues_its_wandb_run_and_tensorboard_curve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from hfsdk.core.trainer.trainer import Trainer

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    small = [
        "data.batch_size=4", "algorithm.n_samples_per_prompt=2", "actor.mini_batch_size=4",
        "actor.micro_batch_size=8", "trainer.loggers=[jsonl, wandb, tensorboard]",
        "wandb.project=hfsdk-test",
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
