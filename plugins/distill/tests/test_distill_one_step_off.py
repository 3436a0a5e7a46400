"""Distillation one step off in this process (shared devices, no Ray): the teacher scores
the batch generated a step ahead, top-k included, exactly as it scores it alone."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hfsdk import REF_TOP_K
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_distill.top_k import TEACHER_TOP_K_IDS, TEACHER_TOP_K_LOG_PROBS
from hfsdk_run_records.step_dump import read_step_dump

OVERRIDES = [
    "trainer.pipeline=one_step_off",
    "trainer.total_steps=2",
    "trainer.rollout_dump=true",
    "data.batch_size=2",
    "algorithm.n_samples_per_prompt=2",
    "rollout.max_response_length=4",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=4",
    "algorithm.top_k=3",
]


@pytest.mark.slow
def test_one_step_off_the_teacher_scores_the_batch_generated_ahead(tmp_path: Path) -> None:
    from hfsdk_backend_fsdp.actor import ReferenceEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    config = load_run_config("distill", None, OVERRIDES)
    run_dir = tmp_path / "run"
    rows = Trainer(config, run_dir, quiet=True).fit()
    # Step 2 trained on a batch sampled before update 1 (one step ahead).
    assert [r["async/staleness_max"] for r in rows] == [0.0, 1.0]
    for row in rows:
        assert math.isfinite(row["distill/reverse_kl"])
        assert row["actor/top_k_kl"] > 0.0
    update = read_step_dump(run_dir, 2, for_what="this test").update
    assert update is not None
    asked = update.select()
    asked.meta[REF_TOP_K] = 3
    teacher = ReferenceEngine(FSDPRoleConfig(model_path=config.teacher.model_path), role="t")
    alone = teacher.compute_ref_log_prob(asked)
    mask = update["response_mask"].bool()
    assert torch.allclose(
        update["teacher_log_probs"][mask], alone["ref_log_probs"][mask], atol=1e-5
    )
    assert torch.equal(update[TEACHER_TOP_K_IDS][mask], alone["ref_top_k_ids"][mask])
    assert torch.allclose(
        update[TEACHER_TOP_K_LOG_PROBS][mask], alone["ref_top_k_log_probs"][mask], atol=1e-5
    )
