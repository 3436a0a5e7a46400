"""The trainer loop: run directory contents, atomic checkpoints and exact resume."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import hfsdk
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import get_plugin_manager
from hfsdk.core.trainer.step_observers import StepObserver
from hfsdk.core.trainer.trainer import Trainer

SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
]
COMPARED = ("reward/mean", "response_length/mean", "actor/pg_loss", "actor/kl", "actor/grad_norm")


def _weights(run_dir: Path, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(
        str(run_dir / "checkpoints" / f"step_{step}" / "actor_hf" / "model.safetensors")
    )


@pytest.mark.slow
@pytest.mark.distributed
def test_resume_continues_exactly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    straight_dir, resumed_dir = tmp_path / "straight", tmp_path / "resumed"
    straight = Trainer(
        load_run_config("grpo", None, [*SMALL, "trainer.total_steps=4"]), straight_dir, quiet=True
    ).fit()
    first = Trainer(
        load_run_config("grpo", None, [*SMALL, "trainer.total_steps=2"]), resumed_dir, quiet=True
    ).fit()
    assert [r["step"] for r in first] == [1, 2]
    assert (resumed_dir / "checkpoints" / "step_2" / "COMPLETE").exists()
    # the same command with more steps resumes from step 2
    resumed = Trainer(
        load_run_config("grpo", None, [*SMALL, "trainer.total_steps=4"]), resumed_dir, quiet=True
    ).fit()
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]
    # quiet (--quiet) hides the progress bar, not that the run went on from a checkpoint
    assert f"resuming from {resumed_dir / 'checkpoints' / 'step_2'} (step 2)" in caplog.text
    for a, b in zip(straight, resumed, strict=True):
        for key in COMPARED:
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["step"], key)
    final_a, final_b = _weights(straight_dir, 4), _weights(resumed_dir, 4)
    assert final_a.keys() == final_b.keys()
    for name in final_a:
        assert (final_a[name] - final_b[name]).abs().max().item() < 1e-6, name
    # a different model would not compare equal: step 2's weights differ from step 4's
    early = _weights(resumed_dir, 2)
    assert any((early[n] - final_b[n]).abs().max().item() > 0 for n in early)
    saved = yaml.safe_load((resumed_dir / "config.yaml").read_text())
    assert saved["algo"] == "grpo" and saved["trainer"]["total_steps"] == 4
    # Fewer steps than the run made: nothing to train, and config.yaml still says what ran.
    again = Trainer(
        load_run_config("grpo", None, [*SMALL, "trainer.total_steps=3"]), resumed_dir, quiet=True
    ).fit()
    assert [r["step"] for r in again] == [1, 2, 3, 4]
    saved = yaml.safe_load((resumed_dir / "config.yaml").read_text())
    assert saved["trainer"]["total_steps"] == 4  # before: 3, beside 4 logged steps
    # Without the jsonl logger metrics.jsonl is an earlier run's: fit() returns nothing.
    overrides = [*SMALL, "trainer.total_steps=5", "trainer.loggers=[console]"]
    assert Trainer(load_run_config("grpo", None, overrides), resumed_dir, quiet=True).fit() == []


def test_resuming_with_another_config_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    config = load_run_config("grpo", None, SMALL)
    (run_dir / "checkpoints" / "step_1").mkdir(parents=True)
    (run_dir / "checkpoints" / "step_1" / "COMPLETE").write_text("1\n")
    torch.save({"step": 1}, run_dir / "checkpoints" / "step_1" / "trainer_state.pt")
    (run_dir / "config.yaml").write_text(config.to_yaml())
    Trainer(config, run_dir)  # same config: fine
    other = load_run_config("grpo", None, [*SMALL, "actor.optim.lr=0.5"])
    with pytest.raises(HfsdkError, match=r"different config \(actor\.optim\.lr changed\)"):
        Trainer(other, run_dir)
    # only the run length may change
    Trainer(load_run_config("grpo", None, [*SMALL, "trainer.total_steps=99"]), run_dir)


class TokensSeen(StepObserver):
    """Records each step's ``perf/tokens`` (observers see it; the metrics line does not)."""

    def __init__(self, seen: list[float]) -> None:
        self.seen = seen

    def on_step_metrics(self, view: Any, metrics: Mapping[str, float]) -> dict[str, float]:
        self.seen.append(metrics["perf/tokens"])
        return {}


def test_throughput_leaves_out_the_validation_time(tmp_path: Path) -> None:
    # Before: the step's tokens over its whole wall time, validation included, so every
    # val_every step showed a throughput dip that no training caused.
    seen: list[float] = []

    class Counter:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_step_observers(register):  # type: ignore[no-untyped-def]
            register("tokens_seen", lambda config, run_dir: TokensSeen(seen))

    get_plugin_manager().pm.register(Counter, name="counter")
    overrides = ["data.batch_size=2", "algorithm.n_samples_per_prompt=2",
                 "actor.mini_batch_size=4", "actor.micro_batch_size=4",
                 "rollout.max_response_length=4", "trainer.total_steps=1",
                 "trainer.val_every=1"]  # fmt: skip
    config = load_run_config("grpo", None, overrides)
    (row,) = Trainer(config, tmp_path / "run", quiet=True).fit()
    (tokens,) = seen
    trained_s = row["timing/step_s"] - row["timing/validation_s"]
    assert tokens > 0 and row["timing/validation_s"] > 0
    assert row["perf/throughput_tokens_per_s"] == pytest.approx(tokens / trained_s, rel=1e-9)


@pytest.mark.distributed
@pytest.mark.heavy
def test_in_process_workers_train_exactly_like_ray_workers(tmp_path: Path) -> None:
    runs = {}
    for executor in ("ray", "local"):
        config = load_run_config(
            "grpo", None, [*SMALL, "trainer.total_steps=2", f"trainer.executor={executor}"]
        )
        runs[executor] = Trainer(config, tmp_path / executor, quiet=True).fit()
    for a, b in zip(runs["ray"], runs["local"], strict=True):
        for key in COMPARED:
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-8), (a["step"], key)
    ray_weights, local_weights = _weights(tmp_path / "ray", 2), _weights(tmp_path / "local", 2)
    for name in ray_weights:
        torch.testing.assert_close(local_weights[name], ray_weights[name], rtol=0, atol=1e-6)
    # Both trained: the weights moved away from the starting model's.
    assert runs["local"][-1]["actor/grad_norm"] > 0


@pytest.mark.slow
def test_in_process_resume_is_exact_when_saving_draws_random_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process workers share the controller's RNG; a save that draws from it (a megatron
    HF export builds a model) must not shift the state that resuming restores."""
    from hfsdk.core.trainer.session import TrainingSession

    original = TrainingSession.save_workers

    def save_and_draw(self: TrainingSession, *args: object, **kwargs: object) -> object:
        out = original(self, *args, **kwargs)
        torch.rand(1)
        return out

    monkeypatch.setattr(TrainingSession, "save_workers", save_and_draw)
    local = [*SMALL, "trainer.executor=local", "trainer.loggers=[jsonl]"]

    def fit(run: str, steps: int) -> list[dict]:
        config = load_run_config("grpo", None, [*local, f"trainer.total_steps={steps}"])
        return Trainer(config, tmp_path / run, quiet=True).fit()

    straight = fit("straight", 2)
    fit("resumed", 1)
    resumed = fit("resumed", 2)
    for key in COMPARED:
        assert straight[1][key] == pytest.approx(resumed[1][key], rel=1e-6, abs=1e-9), key
    final_a, final_b = _weights(tmp_path / "straight", 2), _weights(tmp_path / "resumed", 2)
    for name in final_a:
        assert torch.equal(final_a[name], final_b[name]), name


def test_runs_started_in_the_same_second_get_their_own_default_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs without --run-dir in one second: the second died "is in use by another run"."""
    from datetime import datetime

    from hfsdk.core.trainer import trainer

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def,override]
            return datetime(2026, 1, 2, 3, 4, 5, tzinfo=tz)

    monkeypatch.setattr(trainer, "datetime", Frozen)
    monkeypatch.chdir(tmp_path)
    first = trainer.create_default_run_dir("grpo")  # held (locked) by a run still going
    second = trainer.create_default_run_dir("grpo")
    (Path("runs") / "grpo-20260102-030405-3").mkdir()  # a finished run's: never reused
    third = trainer.create_default_run_dir("grpo")
    names = [d.path.as_posix() for d in (first, second, third)]
    assert names == ["runs/grpo-20260102-030405", "runs/grpo-20260102-030405-2",
                     "runs/grpo-20260102-030405-4"]  # fmt: skip
    for directory in (first, second, third):
        directory.release()


def test_a_default_directory_lost_to_a_simultaneous_run_moves_on_and_an_unwritable_one_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk.core.trainer import trainer

    class Raced(trainer.RunDirectory):  # another run locks the name between our check and lock
        def create_and_lock(self) -> None:
            if self.path.name.count("-") == 2:  # the first name, grpo-<date>-<time>
                self.path.mkdir(parents=True)
                raise HfsdkError("run directory is in use by another hfsdk run")
            super().create_and_lock()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(trainer, "RunDirectory", Raced)
    taken = trainer.create_default_run_dir("grpo")
    assert taken.path.name.endswith("-2") and taken.path.name.count("-") == 3
    taken.release()
    monkeypatch.undo()
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "runs").write_text("a file where runs/ would go")
    monkeypatch.chdir(tmp_path / "ro")
    with pytest.raises(HfsdkError, match="cannot be created"):
        trainer.create_default_run_dir("grpo")
