"""A GRPO run whose rollout pool is one tp-2 replica (``placement.pools.rollout.tp: 2``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

OVERRIDES = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "placement.pools.global.devices=1",
    "placement.pools.rollout.devices=2",
    "placement.pools.rollout.tp=2",
    "trainer.executor=ray",
    "trainer.loggers=[jsonl]",
    "trainer.total_steps=3",
]


@pytest.mark.parametrize(
    ("pipeline", "stale"),
    # one_step_off over a tp-2 replica repeats what the sync run and the tp = 1 pool's
    # one_step_off test check; heavy keeps the suite's time (make test-all runs it).
    [("sync", False), pytest.param("one_step_off", True, marks=pytest.mark.heavy)],
)
def test_a_tp2_replica_samples_with_the_actors_weights(
    tmp_path: Path, pipeline: str, stale: bool
) -> None:
    """The replica's log-probs of what it sampled (a tp-2 forward on its slices) equal the
    actor's old log-probs under sync, after every update (every slice of every weight is in
    them: one stale or mis-cut slice would show); one step off they trail by one update."""
    config = load_run_config("grpo", None, [*OVERRIDES, f"trainer.pipeline={pipeline}"])
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert rows[0]["rollout/log_prob_diff_max"] < 1e-4
    later = [r["rollout/log_prob_diff_max"] for r in rows[1:]]
    assert all((d > 1e-3) if stale else (d < 1e-4) for d in later), later
    assert [r["async/staleness_max"] for r in rows] == ([0.0, 1.0, 1.0] if stale else [0.0] * 3)
    assert [r["async/rollout_weights_version"] for r in rows] == (
        [0.0, 0.0, 1.0] if stale else [0.0, 1.0, 2.0]
    )
    synced = [r for r in rows if "sync/bytes" in r]
    assert synced and all(r["sync/bytes"] == synced[0]["sync/bytes"] > 0 for r in synced)
