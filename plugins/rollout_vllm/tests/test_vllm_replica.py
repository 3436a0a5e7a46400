"""A vLLM engine as a rollout replica on a pool of its own (placement.pools.rollout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

OVERRIDES = [
    "rollout.backend=vllm",
    "placement.pools.global.devices=1",
    "placement.pools.rollout.devices=1",
    "trainer.executor=ray",
    "trainer.loggers=[jsonl]",
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("pipeline", ["sync", "one_step_off"])
def test_a_vllm_replica_samples_with_the_weights_the_pipeline_promises(
    tmp_path: Path, pipeline: str
) -> None:
    """vLLM's log-probs of what it sampled against the actor's, before its update: equal
    under ``sync`` (the engine reloaded every broadcast weight), a step behind under
    ``one_step_off`` (it sampled with the weights before the last update)."""
    config = load_run_config(
        "grpo", None, [*OVERRIDES, "trainer.total_steps=3", f"trainer.pipeline={pipeline}"]
    )
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    gaps = [r["rollout/log_prob_diff_max"] for r in rows]
    synced = [r["sync/bytes"] for r in rows if "sync/bytes" in r]
    assert synced and all(b > 0 for b in synced)
    if pipeline == "sync":
        assert all(gap < 1e-4 for gap in gaps), gaps
    else:
        assert gaps[0] < 1e-4 and all(gap > 1e-3 for gap in gaps[1:]), gaps
