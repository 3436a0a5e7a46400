"""assert_runs_identical: two runs of one config compared step by step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from hfsdk_testing.runs import assert_runs_identical


def _run(path: Path, step: int) -> Path:
    weights = path / "checkpoints" / f"step_{step}" / "actor_hf"
    weights.mkdir(parents=True)
    save_file({"w": torch.ones(2)}, str(weights / "model.safetensors"))
    return path


@pytest.mark.parametrize("last_norm", [2.0, 1.0])
def test_a_validation_row_before_training_is_not_a_trained_step(
    tmp_path: Path, last_norm: float
) -> None:
    # trainer.val_before_train logs step 0 with val/ metrics only: no actor/grad_norm (KeyError).
    rows = [
        {"step": 0, "val/pass@1": 0.5},
        {"step": 1, "actor/grad_norm": 1.0},
        {"step": 2, "actor/grad_norm": last_norm, "val/pass@1": 0.75},
    ]
    run_a, run_b = _run(tmp_path / "a", 2), _run(tmp_path / "b", 2)
    if last_norm == 2.0:
        assert_runs_identical(run_a, rows, run_b, rows, 2)
        return
    with pytest.raises(AssertionError):  # equal first and last norms: the runs did not train
        assert_runs_identical(run_a, rows, run_b, rows, 2)
