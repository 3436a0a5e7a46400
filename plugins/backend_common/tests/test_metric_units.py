"""The actor's metrics are means over their own units, whatever the micro-batch and rank layout.

A per-kept-token (a rollout correction's mask) or per-sequence mean (or DPO's per-pair
mean: ``plugins/dpo/tests/test_losses.py``) was
weighted by each micro-batch's valid tokens: one micro-batch reported the true value, two
micro-batches or two ranks another. ``add_max`` metrics were averaged over ranks. Each
layout here runs :func:`actor_micro_loss` the way the fsdp and megatron engines do (one
``MetricAccumulator`` per rank, :meth:`~MetricAccumulator.gather` at the end, the core's
mean over ranks) and must report the hand-computed value.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import Batch, LossAggregation, LossCounts
from hfsdk_backend_common.engine_support import MetricAccumulator
from hfsdk_backend_common.objectives import ActorObjective, actor_micro_loss
from hfsdk_policy_losses.losses import ppo_clip_loss
from hfsdk_rollout_corrections.corrections import (
    MISConfig,
    TrustRegionConfig,
    mis,
    trust_region,
)

# Each layout: per rank, its micro-batches' rows (one mini-batch).
ONE_MICRO = [[[0, 1, 2, 3]]]
TWO_MICROS = [[[0, 1], [2, 3]]]
TWO_RANKS = [[[0, 1]], [[2, 3]]]
LAYOUTS = {"one micro-batch": ONE_MICRO, "two micro-batches": TWO_MICROS, "two ranks": TWO_RANKS}


def _metrics(
    objective: ActorObjective, tensors: dict[str, torch.Tensor], layout: list[Any]
) -> dict[str, float]:
    mask = tensors["response_mask"]
    counts = LossCounts(tokens=float(mask.sum()), sequences=float(mask.any(dim=-1).sum()))
    dp = len(layout)
    ranks = []
    for micros in layout:
        metrics = MetricAccumulator(dp)
        agg = LossAggregation.from_counts("token-mean", counts, dp_size=dp)
        for rows in micros:
            micro = Batch.from_dict(tensors={k: v[rows] for k, v in tensors.items()})
            log_prob = tensors["log_prob"][rows].clone().requires_grad_()
            actor_micro_loss(
                objective, micro, log_prob, torch.zeros_like(log_prob), aggregation=agg,
                counts=counts, has_reference=False, metrics=metrics,
            )  # fmt: skip
        metrics.end_minibatch()
        ranks.append(metrics)
    states = [metrics.rank_state() for metrics in ranks]  # what gather's all_gather carries
    for metrics in ranks:
        metrics.take_ranks(states)
    results = [metrics.result() for metrics in ranks]
    return {k: sum(r[k] for r in results) / len(results) for k in results[0]}  # the core's mean


def _mis_tensors() -> dict[str, torch.Tensor]:
    # ρ = π_old/μ: rows 0, 1 have three tokens at e² > cap 2 (dropped) and one at 1.5
    # (kept, π/π_old = e^0.5 clipped); rows 2, 3 keep all four at 1.1 (ratio 1).
    log_rho = torch.tensor([[2.0, 2.0, 2.0, 0.405465]] * 2 + [[0.09531] * 4] * 2)
    return {
        "response_mask": torch.ones(4, 4),
        "old_log_probs": torch.zeros(4, 4),
        "rollout_log_probs": -log_rho,
        "advantages": torch.ones(4, 4),
        "log_prob": torch.tensor([[0.5] * 4] * 2 + [[0.0] * 4] * 2),
    }


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_correction_and_pg_metrics_are_means_over_the_kept_tokens(layout: list[Any]) -> None:
    objective = ActorObjective(
        policy_loss=ppo_clip_loss, corrections=[("mis", mis, MISConfig(cap=2.0))]
    )
    metrics = _metrics(objective, _mis_tensors(), layout)
    kept = 2 + 8  # one token in each of rows 0, 1; all of rows 2, 3
    assert metrics["actor/is_weight_mean"] == pytest.approx((2 * 1.5 + 8 * 1.1) / kept, rel=1e-5)
    assert metrics["actor/is_weight_max"] == pytest.approx(1.5, rel=1e-5)  # max, not a mean
    assert metrics["actor/pg_clipfrac"] == pytest.approx(2 / kept)  # docs/async.md: kept only
    assert metrics["actor/ppo_kl"] == pytest.approx(-0.5 * 2 / kept)
    assert metrics["actor/is_kept_share"] == pytest.approx(kept / 16)  # of the valid tokens
    assert metrics["actor/mis_masked_share"] == pytest.approx(6 / 16)


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_sequence_shares_are_means_over_sequences(layout: list[Any]) -> None:
    # Row 0 (8 tokens) has a token 1.0 off μ: trust_region drops it; rows 1-3 (1 token) stay.
    mask = torch.zeros(4, 8)
    mask[0] = 1
    mask[1:, :1] = 1
    rollout = torch.zeros(4, 8)
    rollout[0, 3] = -1.0
    tensors = {
        "response_mask": mask,
        "old_log_probs": torch.zeros(4, 8),
        "rollout_log_probs": rollout,
        "advantages": mask.clone(),
        "log_prob": torch.zeros(4, 8),
    }
    correction = ("trust_region", trust_region, TrustRegionConfig(delta=0.5))
    objective = ActorObjective(policy_loss=ppo_clip_loss, corrections=[correction])
    metrics = _metrics(objective, tensors, layout)
    assert metrics["actor/trust_region_masked_seq_share"] == pytest.approx(1 / 4)
    assert metrics["actor/trust_region_masked_share"] == pytest.approx(8 / 11)


def test_a_mini_batch_without_units_is_left_out_of_the_mean() -> None:
    metrics = MetricAccumulator()
    metrics.add_weighted("m", 0.0, 0.0)  # e.g. every token dropped
    metrics.end_minibatch()
    metrics.add_weighted("m", 0.5, 4.0)
    metrics.end_minibatch()
    assert metrics.result() == {"m": 0.5}


WORKER = """
import sys, torch.distributed as dist
from hfsdk_backend_common.engine_support import MetricAccumulator
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank, world_size=2)
m = MetricAccumulator(2)
m.add_weighted("share", [1.0, 0.0][rank], [1.0, 3.0][rank])  # 1 of 4 units
m.add_max("max", [1.5, 1.3][rank])
if rank:
    m.add_weighted("only_rank_1", 2.0, 1.0)
m.end_minibatch()
m.gather()
print(sorted(m.result().items()), flush=True)
dist.barrier()  # both done before either tears down (gloo aborted a rank leaving early)
dist.destroy_process_group()
"""


@pytest.mark.distributed
def test_gather_sums_weighted_totals_and_maxes_over_gloo_ranks(tmp_path: Path) -> None:
    store = str(tmp_path / "store")  # (a file, not a free port another process may take)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), store],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [process.communicate(timeout=120)[0] for process in ranks]
    assert [process.returncode for process in ranks] == [0, 0], outputs
    expected = str(sorted({"share": 0.25, "max": 1.5, "only_rank_1": 2.0}.items()))
    assert [output.strip().splitlines()[-1] for output in outputs] == [expected] * 2
