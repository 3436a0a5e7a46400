"""``trainer.deterministic``: two runs of one config are bitwise identical, metrics and weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "trainer.loggers=[jsonl]",
    "trainer.deterministic=true",
]
# Wall-clock measurements, and what is derived from them, differ between any two runs.
_TIMED = ("timing/", "perf/", "sync/send_s", "sync/receive_s", "sync/rollout_wait_s", "plan/")


def _untimed(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith(_TIMED)}


def _weights(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    path = run_dir / "checkpoints" / f"step_{step}" / "actor_hf" / "model.safetensors"
    return load_file(str(path))


def _two_runs(tmp_path: Path, *extra: str, steps: int = 3) -> tuple[list, list]:
    args = [*SMALL, f"trainer.total_steps={steps}", *extra]
    a, b = (
        Trainer(load_run_config("grpo", None, args), tmp_path / name, quiet=True).fit()
        for name in ("a", "b")
    )
    assert len(a) == len(b) == steps
    return a, b


def _assert_identical(tmp_path: Path, a: list, b: list, steps: int) -> None:
    for row_a, row_b in zip(a, b, strict=True):
        untimed_a, untimed_b = _untimed(row_a), _untimed(row_b)
        assert untimed_a.keys() == untimed_b.keys()
        for key, value in untimed_a.items():  # bitwise: ==, and NaN only where NaN
            other = untimed_b[key]
            assert value == other or (value != value and other != other), (row_a["step"], key)
    weights_a, weights_b = _weights(tmp_path / "a", steps), _weights(tmp_path / "b", steps)
    assert weights_a.keys() == weights_b.keys()
    for name, tensor in weights_a.items():
        assert torch.equal(tensor, weights_b[name]), name
    assert a[0]["actor/grad_norm"] != a[-1]["actor/grad_norm"]  # the runs trained


@pytest.mark.slow
def test_two_in_process_runs_are_bitwise_identical(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    assert "actor/grad_norm" in a[0] and "reward/mean" in a[0]
    _assert_identical(tmp_path, a, b, 3)


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.heavy
def test_two_ray_runs_with_a_rollout_pool_are_bitwise_identical(tmp_path: Path) -> None:
    """Worker processes, a rollout pool and one_step_off: generation overlaps training, yet
    every number that is not a wall-clock time repeats."""
    a, b = _two_runs(
        tmp_path,
        "trainer.executor=ray",
        "placement.pools.global.devices=1",
        "placement.pools.rollout.devices=1",
        "trainer.pipeline=one_step_off",
        "algorithm.is_correction=tis",
    )
    _assert_identical(tmp_path, a, b, 3)


def test_the_switch_reaches_the_controller_and_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from hfsdk.core import determinism

    env = determinism.determinism_env(7)
    assert env == {
        "HFSDK_DETERMINISTIC": "1",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "PYTHONHASHSEED": "7",
    }
    monkeypatch.delenv(determinism.DETERMINISTIC_ENV, raising=False)
    assert not determinism.apply_from_env()
    assert not torch.are_deterministic_algorithms_enabled()
    monkeypatch.setenv(determinism.DETERMINISTIC_ENV, "1")
    try:
        assert determinism.apply_from_env()  # what a worker process does when it starts
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    finally:
        determinism.disable_determinism()
    assert not torch.are_deterministic_algorithms_enabled()
