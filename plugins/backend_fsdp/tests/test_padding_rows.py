"""Training never learns from the rows a dispatch repeats to fill the last ranks.

6 samples on 4 ranks: the training dispatch gives every rank 2 rows, so rank
3 holds two repeats of rows 0-1. Marked as padding, they get no weight: the
gradient and the metrics (averaged over ranks as ``dp_compute_metric`` does)
equal those of the whole batch on one process. Without the marks (the plain
``dp_compute_proto`` split) the same run differs, so the check can fail.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.workers.futures import CollectSpec
from hfsdk.core.workers.protocols import PAD_ROWS_META, collect_mean_metrics
from hfsdk_backend_common.engine_support import without_padding_weight
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

sys.path.insert(0, str(Path(__file__).parent))
from gloo_ranks import run_ranks
from padded_rank_worker import GradientRecorder, objective

WORKER = Path(__file__).with_name("padded_rank_worker.py")
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 ="]
WORLD = 4
METRICS = (
    "actor/pg_loss",
    "actor/loss",
    "actor/kl",
    "actor/entropy",
    "actor/pg_clipfrac",
    "actor/ppo_kl",
    "actor/grad_norm",
)


def test_padding_rows_lose_their_mask_and_the_callers_batch_is_kept() -> None:
    mask = torch.ones(4, 3)
    batch = Batch.from_dict(tensors={"response_mask": mask}, meta={PAD_ROWS_META: 2})
    out = without_padding_weight(batch)
    assert out["response_mask"].sum(dim=-1).tolist() == [3.0, 3.0, 0.0, 0.0]
    assert batch["response_mask"].sum() == 12  # the input is untouched


@pytest.mark.heavy
@pytest.mark.distributed
def test_six_samples_on_four_ranks_train_like_one_process(
    model_dir: Path, make_prompts: Callable[..., Batch], tmp_path: Path
) -> None:
    settings = {"model_path": str(model_dir), "mini_batch_size": 8, "micro_batch_size": 2}
    actor = GradientRecorder(FSDPRoleConfig(**settings, optim=OptimConfig(lr=1e-3)), role="actor")
    rollout = HFRollout(HFRolloutConfig(max_response_length=6, n=2, temperature=0.7), actor)
    batch = rollout.generate_sequences(make_prompts(PROMPTS))
    batch = batch.union(actor.compute_log_prob(batch))
    mask = batch["response_mask"]
    # Off-policy old log-probs (so clipping and ppo_kl are not trivially 0), random advantages.
    batch["old_log_probs"] = (batch["old_log_probs"] + 0.3 * torch.randn(mask.shape)) * mask
    batch["ref_log_probs"] = (batch["old_log_probs"] + 0.2 * torch.randn(mask.shape)) * mask
    batch["advantages"] = torch.randn(len(batch), 1) * mask
    assert len(batch) == 6 and len(set(mask.sum(dim=-1).tolist())) > 1  # unequal lengths
    keys = [
        "input_ids",
        "attention_mask",
        "position_ids",
        "responses",
        "response_mask",
        "old_log_probs",
        "ref_log_probs",
        "advantages",
    ]
    torch.save({"config": settings, "batch": {k: batch[k] for k in keys}}, tmp_path / "in.pt")

    expected_metrics = actor.update_actor(batch, objective())
    expected_gradient = actor.last_gradient

    run_ranks(WORKER, tmp_path, world=WORLD, inputs="in.pt", timeout=240)
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    spec = CollectSpec(ranks=tuple(range(WORLD)))

    marked = results[0]["marked"]
    assert [r["marked"]["rows"] for r in results] == [2, 2, 2, 2]
    for name, value in expected_gradient.items():
        torch.testing.assert_close(marked["gradient"][name], value, atol=1e-6, rtol=1e-4, msg=name)
    # The ranks hold unequal valid tokens (rank 3 none); the collected mean is the global value.
    collected = collect_mean_metrics([r["marked"]["metrics"] for r in results], spec)
    for name in METRICS:
        assert collected[name] == pytest.approx(expected_metrics[name], rel=1e-4, abs=1e-6), name

    # Token-budget passes: the ranks needed different numbers of passes, ran the largest,
    # and the gradient and metrics are still those of the whole batch.
    budget = [r["budget"] for r in results]
    assert len({b["needed"] for b in budget}) > 1
    for name, value in expected_gradient.items():
        torch.testing.assert_close(
            budget[0]["gradient"][name], value, atol=1e-6, rtol=1e-4, msg=name
        )
    collected = collect_mean_metrics([b["metrics"] for b in budget], spec)
    for name in ("actor/pg_loss", "actor/loss", "actor/kl", "actor/grad_norm"):
        assert collected[name] == pytest.approx(expected_metrics[name], rel=1e-4, abs=1e-6), name

    # The same split without padding marks trains rows 0-1 twice: a different gradient.
    unmarked = results[0]["unmarked"]
    differences = [
        float((unmarked["gradient"][name] - value).abs().max())
        for name, value in expected_gradient.items()
    ]
    assert max(differences) > 1e-4
