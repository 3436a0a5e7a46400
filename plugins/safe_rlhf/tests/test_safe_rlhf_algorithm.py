"""Safe-RLHF end to end on Ray: cost falls below the threshold while reward does not fall."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import get_registry
from hfsdk.core.algorithm import AlgorithmContext
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.session import TrainingSession
from hfsdk.core.trainer.trainer import Trainer


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


@pytest.mark.slow
@pytest.mark.distributed
def test_default_run_meets_the_cost_threshold(tmp_path: Path) -> None:
    config = load_run_config("safe_rlhf")
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert len(rows) == 30
    for key in ("cost/mean", "lagrange/lambda", "critic/vf_loss", "cost_critic/vf_loss"):
        assert all(key in r for r in rows), key
    # Every run measured (seeds 0-5, AVX-512 and AVX2 kernels) ended with a last-five cost
    # of 0.000-0.025 and a reward gain of +0.11 to +0.45 (docs/default_task.md).
    threshold = config.algorithm.cost_threshold
    assert _mean(rows[:5], "cost/mean") > threshold  # the initial policy violates it
    assert _mean(rows[-5:], "cost/mean") < threshold
    assert _mean(rows[-5:], "reward/mean") >= _mean(rows[:5], "reward/mean")
    # λ rose while the constraint was violated
    assert max(r["lagrange/lambda"] for r in rows[:5]) > config.algorithm.lambda_init


@pytest.mark.distributed
def test_cost_from_a_model_role() -> None:
    """The cost signal can be a scoring model (its own role) instead of a function."""
    config = load_run_config("safe_rlhf", None, ["cost.model={backend: fsdp}", "data.batch_size=4"])
    spec = get_registry("algorithms")["safe_rlhf"].impl
    with TrainingSession(config, spec) as session:
        assert set(session.groups) == {"actor", "critic", "cost_critic", "reference", "cost"}
        algorithm = spec.program(
            AlgorithmContext(config=config, roles=session.roles, signals=session.signals, spec=spec)
        )
        metrics = algorithm.step(session.loader.next_batch())
    assert "cost/model_score_mean" in metrics
    assert metrics["lagrange/lambda"] > 0
    assert "cost_critic/vf_loss" in metrics
