"""A reward model trains on the megatron backend: the same loss as fsdp, and it learns.

Whole runs (heavy); the quick suite's check of the same engine operation is
plugins/backend_megatron/tests/test_score_model.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

BASE = ["trainer.val_before_train=false", "trainer.val_every=0"]


def _run(run_dir: Path, *overrides: str) -> list[dict]:
    config = load_run_config("reward_model", None, [*BASE, *overrides])
    return Trainer(config, run_dir, quiet=True).fit()


@pytest.mark.slow
@pytest.mark.heavy  # ~30 s on the shared CPU; the engine-level twin is in the quick suite
def test_megatron_trains_a_reward_model_like_fsdp(tmp_path: Path) -> None:
    # Both backends start from the same sequence classifier (a fresh head is initialised
    # differently by each), made by one fsdp step.
    _run(tmp_path / "start", "trainer.total_steps=1")
    start = tmp_path / "start" / "checkpoints" / "step_1" / "reward_model_hf"
    common = [f"reward_model.model_path={start}", "trainer.total_steps=4"]
    fsdp = _run(tmp_path / "fsdp", *common)
    megatron = _run(tmp_path / "megatron", *common, "reward_model.backend=megatron")
    # The first step's loss and pair metrics are computed before any update: equal up to
    # the two backends' kernels (float32).
    for key in ("score_model/loss", "score_model/accuracy", "score_model/margin"):
        assert megatron[0][key] == pytest.approx(fsdp[0][key], rel=1e-4, abs=1e-5), key
    # Later steps see the same pairs after the same updates: megatron's updates are fsdp's
    # (measured: the four losses agreed to 2e-7).
    for f, m in zip(fsdp[1:], megatron[1:], strict=True):
        assert m["score_model/loss"] == pytest.approx(f["score_model/loss"], rel=1e-3)
    export = tmp_path / "megatron" / "checkpoints" / "step_4" / "reward_model_hf"
    assert "ForSequenceClassification" in (export / "config.json").read_text()


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.distributed
def test_a_tensor_parallel_reward_model_trains_like_fsdp(tmp_path: Path) -> None:
    # tp=2 over gloo in two Ray workers: the score head's output and its gradient cross the
    # tensor-parallel split of every layer.
    _run(tmp_path / "start", "trainer.total_steps=1")
    start = tmp_path / "start" / "checkpoints" / "step_1" / "reward_model_hf"
    common = [f"reward_model.model_path={start}", "trainer.total_steps=2"]
    fsdp = _run(tmp_path / "fsdp", *common)
    tp2 = _run(
        tmp_path / "tp2",
        *common,
        "reward_model.backend=megatron",
        "reward_model.parallel.tp=2",
        "placement.pools.global.devices=2",
        "trainer.executor=ray",
    )
    for f, m in zip(fsdp, tp2, strict=True):
        # tp=2 sums each layer's output over two ranks: another reduction order (1e-4).
        assert m["score_model/loss"] == pytest.approx(f["score_model/loss"], rel=1e-4)
        assert m["score_model/accuracy"] == pytest.approx(f["score_model/accuracy"], abs=1e-6)
