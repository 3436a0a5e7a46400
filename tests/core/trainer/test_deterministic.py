"""``trainer.deterministic``: two runs of one config are bitwise identical, metrics and weights."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_testing import SMALL_GRPO, assert_runs_identical

SMALL = [
    *SMALL_GRPO,
    "trainer.deterministic=true",
]


def _two_runs(tmp_path: Path, *extra: str, steps: int = 3) -> tuple[list, list]:
    args = [*SMALL, f"trainer.total_steps={steps}", *extra]
    a, b = (
        Trainer(load_run_config("grpo", None, args), tmp_path / name, quiet=True).fit()
        for name in ("a", "b")
    )
    assert len(a) == len(b) == steps
    return a, b


@pytest.mark.slow
def test_two_in_process_runs_are_bitwise_identical(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    assert "actor/grad_norm" in a[0] and "reward/mean" in a[0]
    assert_runs_identical(tmp_path / "a", a, tmp_path / "b", b, 3)


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
    assert_runs_identical(tmp_path / "a", a, tmp_path / "b", b, 3)


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


def test_disabling_gives_back_every_setting_as_it_was_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: cuDNN autotuning and TF32 stayed off, a user's warn_only mode was forced off and
    CUBLAS_WORKSPACE_CONFIG stayed set after an in-process deterministic run."""
    from hfsdk.core import determinism

    b = torch.backends
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = (b.cudnn.benchmark, b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
    b.cudnn.benchmark = b.cuda.matmul.allow_tf32 = b.cudnn.allow_tf32 = True
    torch.use_deterministic_algorithms(True, warn_only=True)  # the user's own choice
    try:
        determinism.enable_determinism()
        determinism.enable_determinism()  # a restarted attempt enables again
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        assert not b.cudnn.benchmark and not b.cuda.matmul.allow_tf32
        determinism.disable_determinism()
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        assert b.cudnn.benchmark and b.cuda.matmul.allow_tf32 and b.cudnn.allow_tf32
        assert not b.cudnn.deterministic
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    finally:
        torch.use_deterministic_algorithms(False)
        b.cudnn.benchmark, b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = before
