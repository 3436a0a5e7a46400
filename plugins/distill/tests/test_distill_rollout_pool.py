"""Distillation on a rollout pool of its own, one step off: the teacher scores what the pool
generated (on Ray: the replica, the actor and the teacher are separate workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

OVERRIDES = [
    "placement.pools.global.devices=1",
    "placement.pools.rollout.devices=1",
    "trainer.executor=ray",
    "trainer.loggers=[jsonl]",
    "trainer.pipeline=one_step_off",
    "trainer.total_steps=3",
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=8",
    "actor.micro_batch_size=8",
    "algorithm.top_k=4",
    "trainer.rollout_dump=true",
]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.heavy
def test_distill_with_a_rollout_pool_one_step_off(tmp_path: Path) -> None:
    config = load_run_config("distill", None, OVERRIDES)
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    _teacher_scored_the_pools_batches(config, tmp_path / "run")
    # The replica generated every batch, the second and third one step ahead of the actor.
    assert [r["async/staleness_max"] for r in rows] == [0.0, 1.0, 1.0]
    assert [r["async/rollout_weights_version"] for r in rows] == [0.0, 0.0, 1.0]
    # Step 1's batch came from the replica on the actor's initial weights: the actor's
    # log-probs of it equal the replica's own (the teacher scored the same tokens).
    assert rows[0]["rollout/log_prob_diff_max"] < 1e-5
    assert all(r["sync/bytes"] > 0 for r in rows if "sync/bytes" in r)
    for row in rows:
        # The teacher's sampled-token and top-k scores of the pool's batch reached the update.
        assert row["distill/teacher_log_prob_mean"] < 0.0
        assert row["distill/reverse_kl"] == pytest.approx(
            row["distill/student_log_prob_mean"] - row["distill/teacher_log_prob_mean"], abs=1e-5
        )
        assert row["actor/top_k_kl"] > 0.0
        assert 0.0 < row["actor/top_k_kl/teacher_mass"] <= 1.0


def _teacher_scored_the_pools_batches(config: object, run_dir: Path) -> None:
    """Each update's teacher log-probs and top-k (read back from the step dumps) equal the
    teacher's own scoring of that batch, the responses the replica sampled."""
    import torch

    from hfsdk import REF_TOP_K
    from hfsdk_backend_fsdp.actor import ReferenceEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
    from hfsdk_distill.top_k import TEACHER_TOP_K_IDS, TEACHER_TOP_K_LOG_PROBS
    from hfsdk_run_records.step_dump import read_step_dump

    teacher = ReferenceEngine(FSDPRoleConfig(model_path=config.teacher.model_path), role="t")
    for step in (1, 2, 3):
        update = read_step_dump(run_dir, step, for_what="this test").update
        assert update is not None
        asked = update.select()
        asked.meta[REF_TOP_K] = 4
        alone = teacher.compute_ref_log_prob(asked)
        mask = update["response_mask"].bool()
        got = update["teacher_log_probs"][mask]
        assert torch.allclose(got, alone["ref_log_probs"][mask], atol=1e-5), step
        assert torch.equal(update[TEACHER_TOP_K_IDS][mask], alone["ref_top_k_ids"][mask])
        top_k = update[TEACHER_TOP_K_LOG_PROBS][mask]
        assert torch.allclose(top_k, alone["ref_top_k_log_probs"][mask], atol=1e-5), step
