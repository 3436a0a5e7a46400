"""``hfsdk replay`` on a Safe-RLHF run: both critics' and the actor's updates reproduce."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_run_records.replay import replay_steps


@pytest.mark.slow
def test_replay_reproduces_both_critics_and_the_actor(tmp_path: Path) -> None:
    args = [
        "data.batch_size=4",
        "algorithm.n_samples_per_prompt=2",
        "actor.mini_batch_size=4",
        "actor.micro_batch_size=8",
        "trainer.loggers=[jsonl]",
        "trainer.total_steps=2",
        "trainer.rollout_dump=true",
    ]
    run_dir = tmp_path / "run"
    rows = Trainer(load_run_config("safe_rlhf", None, args), run_dir, quiet=True).fit()
    (second,) = replay_steps(run_dir, 2)[1:]
    assert {"critic/vf_loss", "cost_critic/vf_loss", "actor/pg_loss"} <= set(second.compared)
    assert second.differing == []
    assert second.replayed["cost_critic/vf_loss"] == rows[1]["cost_critic/vf_loss"]
