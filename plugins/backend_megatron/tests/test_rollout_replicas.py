"""A megatron actor (tp=2) feeding a rollout replica on a pool of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import default_task_assets
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.heavy]


@pytest.mark.parametrize(("pipeline", "stale"), [("sync", False), ("one_step_off", True)])
def test_a_tp2_megatron_actor_sends_its_weights_to_the_replica(
    tmp_path: Path, pipeline: str, stale: bool
) -> None:
    """Under sync the replica's log-probs of what it sampled equal the actor's (its weights are
    the actor's, gathered from both tensor ranks); one step off they trail by one update."""
    model = str(default_task_assets().model_dir)
    overrides = [
        f"actor.model_path={model}",
        "actor.backend=megatron",
        "actor.parallel.tp=2",
        "reference.backend=megatron",
        "reference.parallel.tp=2",
        "placement.pools.global.devices=2",
        "placement.pools.rollout.devices=1",
        "trainer.executor=ray",
        "trainer.loggers=[jsonl]",
        "trainer.total_steps=3",
        f"trainer.pipeline={pipeline}",
    ]
    rows = Trainer(load_run_config("grpo", None, overrides), tmp_path / "run", quiet=True).fit()
    assert rows[0]["rollout/log_prob_diff_max"] < 1e-4
    later = [r["rollout/log_prob_diff_max"] for r in rows[1:]]
    assert all((d > 1e-3) if stale else (d < 1e-4) for d in later), later
    assert [r["async/staleness_max"] for r in rows] == ([0.0, 1.0, 1.0] if stale else [0.0] * 3)


def test_a_tp2_megatron_actor_feeds_a_tp2_rollout_replica(tmp_path: Path) -> None:
    """``placement.pools.rollout.tp: 2``: the replica's two ranks keep their slices of the HF
    tensors the actor's rank 0 broadcasts; under sync its log-probs equal the actor's."""
    model = str(default_task_assets().model_dir)
    overrides = [
        f"actor.model_path={model}",
        "actor.backend=megatron",
        "actor.parallel.tp=2",
        "reference.backend=megatron",
        "reference.parallel.tp=2",
        "placement.pools.global.devices=2",
        "placement.pools.rollout.devices=2",
        "placement.pools.rollout.tp=2",
        "trainer.executor=ray",
        "trainer.loggers=[jsonl]",
        "trainer.total_steps=2",
    ]
    rows = Trainer(load_run_config("grpo", None, overrides), tmp_path / "run", quiet=True).fit()
    assert all(r["rollout/log_prob_diff_max"] < 1e-4 for r in rows)
    assert [r["async/rollout_weights_version"] for r in rows] == [0.0, 1.0]
