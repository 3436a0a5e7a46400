"""The dpo loss equals a hand computation: value, gradient, label smoothing, shares of a split."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk import Batch, HfsdkError, LossAggregation, LossCounts
from hfsdk_backend_common.engine_support import MetricAccumulator
from hfsdk_backend_common.objectives import ActorObjective, actor_micro_loss
from hfsdk_dpo.losses import DPOLossConfig, dpo_loss

BETA = 0.3


def _pairs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three interleaved pairs of responses of different lengths (log-probs, ref, mask, labels)."""
    gen = torch.Generator().manual_seed(seed)
    log_prob = -torch.rand(6, 5, generator=gen, dtype=torch.float64) * 3
    ref = -torch.rand(6, 5, generator=gen, dtype=torch.float64) * 3
    lengths = [5, 2, 3, 4, 1, 5]
    mask = torch.tensor([[1] * n + [0] * (5 - n) for n in lengths], dtype=torch.float64)
    labels = torch.tensor([1.0, -1.0] * 3, dtype=torch.float64)[:, None] * mask
    return log_prob, ref, mask, labels


def _hand(log_prob, ref, mask, beta, eps=0.0):  # type: ignore[no-untyped-def]
    """Loss and d loss / d log_prob written out pair by pair, in plain Python floats."""
    rows, width = log_prob.shape
    grad = [[0.0] * width for _ in range(rows)]
    total = 0.0
    pairs = rows // 2
    for i in range(pairs):
        c, r = 2 * i, 2 * i + 1
        rc = beta * sum(float(log_prob[c, t] - ref[c, t]) * float(mask[c, t]) for t in range(width))
        rr = beta * sum(float(log_prob[r, t] - ref[r, t]) * float(mask[r, t]) for t in range(width))
        z = rc - rr
        sig = 1.0 / (1.0 + math.exp(-z))
        total += -(1 - eps) * math.log(sig) - eps * math.log(1.0 - sig)
        # d/dz of the loss: -(1-eps)·(1-σ(z)) + eps·σ(z)
        dz = -(1 - eps) * (1.0 - sig) + eps * sig
        for t in range(width):
            grad[c][t] = dz * beta * float(mask[c, t]) / pairs
            grad[r][t] = -dz * beta * float(mask[r, t]) / pairs
    return total / pairs, torch.tensor(grad, dtype=torch.float64)


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_loss_and_gradient_equal_the_hand_computation(eps: float) -> None:
    log_prob, ref, mask, labels = _pairs()
    log_prob.requires_grad_(True)
    loss, metrics = dpo_loss(
        log_prob=log_prob,
        old_log_prob=ref,
        advantages=labels,
        response_mask=mask,
        config=DPOLossConfig(beta=BETA, label_smoothing=eps),
    )
    loss.backward()
    expected, grad = _hand(log_prob.detach(), ref, mask, BETA, eps)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-12)
    assert torch.allclose(log_prob.grad, grad, rtol=1e-10, atol=1e-14)
    # Nothing flows through padding.
    assert bool((log_prob.grad[mask == 0] == 0).all())
    assert 0.0 <= metrics["dpo_accuracy"][0] <= 1.0
    assert metrics["dpo_accuracy"][1] == 3  # a mean over this part's pairs


def test_equal_policy_and_reference_give_log_two() -> None:
    log_prob, _, mask, labels = _pairs()
    loss, metrics = dpo_loss(
        log_prob=log_prob, old_log_prob=log_prob, advantages=labels, response_mask=mask
    )
    assert float(loss) == pytest.approx(math.log(2.0))
    assert metrics == {"dpo_accuracy": (0.0, 3.0), "dpo_margin": (0.0, 3.0)}


def test_parts_with_global_counts_sum_to_the_whole_and_dp_scales() -> None:
    log_prob, ref, mask, labels = _pairs(1)
    config = DPOLossConfig(beta=BETA)
    whole, _ = dpo_loss(
        log_prob=log_prob, old_log_prob=ref, advantages=labels, response_mask=mask, config=config
    )
    parts = 0.0
    for rows in (slice(0, 4), slice(4, 6)):  # two micro-batches of whole pairs
        agg = LossAggregation(global_token_count=float(mask.sum()), global_seq_count=6.0)
        part, _ = dpo_loss(
            log_prob=log_prob[rows],
            old_log_prob=ref[rows],
            advantages=labels[rows],
            response_mask=mask[rows],
            config=config,
            aggregation=agg,
        )
        parts += float(part)
    assert parts == pytest.approx(float(whole), rel=1e-12)
    # Two ranks each holding half: their shares times dp average back to the whole.
    agg2 = LossAggregation(global_seq_count=6.0, dp_size=2)
    share, _ = dpo_loss(
        log_prob=log_prob[:2], old_log_prob=ref[:2], advantages=labels[:2],
        response_mask=mask[:2], config=config, aggregation=agg2,
    )  # fmt: skip
    single, _ = dpo_loss(
        log_prob=log_prob[:2], old_log_prob=ref[:2], advantages=labels[:2],
        response_mask=mask[:2], config=config,
    )  # fmt: skip
    assert float(share) == pytest.approx(float(single) * 2 / 3)


def test_rows_that_are_not_whole_pairs_are_refused() -> None:
    log_prob, ref, mask, labels = _pairs()
    with pytest.raises(HfsdkError, match="not whole"):
        dpo_loss(
            log_prob=log_prob[1:4], old_log_prob=ref[1:4], advantages=labels[1:4],
            response_mask=mask[1:4],
        )  # fmt: skip
    swapped = labels[[1, 0, 2, 3, 4, 5]]
    with pytest.raises(HfsdkError, match="micro_batch_tokens"):
        dpo_loss(log_prob=log_prob, old_log_prob=ref, advantages=swapped, response_mask=mask)


# Per rank, its micro-batches' rows (one mini-batch of two pairs).
LAYOUTS = {
    "one micro-batch": [[[0, 1, 2, 3]]],
    "two micro-batches": [[[0, 1], [2, 3]]],
    "two ranks": [[[0, 1]], [[2, 3]]],
}


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_actor_reports_accuracy_and_margin_over_pairs_whatever_the_layout(
    layout: list[list[list[int]]],
) -> None:
    """Weighted by each micro-batch's tokens they read 0.889 and 0.14 from two micro-batches
    or two ranks (one long pair won, one short lost): the true values are 0.5 and 0.07."""
    # Pair 0: 8 tokens a row, z = 0.1·(0.8 + 0.8) = 0.16; pair 1: 1 token, z = −0.02.
    mask = torch.zeros(4, 8)
    mask[:2] = 1
    mask[2:, :1] = 1
    labels = torch.tensor([1.0, -1.0, 1.0, -1.0])[:, None] * mask
    log_prob = torch.tensor([0.1, -0.1, -0.1, 0.1])[:, None] * mask
    counts = LossCounts(tokens=float(mask.sum()), sequences=4.0)
    objective = ActorObjective(policy_loss=dpo_loss)
    ranks = []
    for micros in layout:  # as the engines run it, one MetricAccumulator per rank
        metrics = MetricAccumulator(len(layout))
        agg = LossAggregation.from_counts("token-mean", counts, dp_size=len(layout))
        for rows in micros:
            micro = Batch.from_dict(
                tensors={
                    "response_mask": mask[rows],
                    "old_log_probs": torch.zeros(len(rows), 8),
                    "advantages": labels[rows],
                }
            )
            actor_micro_loss(
                objective, micro, log_prob[rows].clone().requires_grad_(),
                torch.zeros(len(rows), 8), aggregation=agg, counts=counts,
                has_reference=False, metrics=metrics,
            )  # fmt: skip
        metrics.end_minibatch()
        ranks.append(metrics)
    states = [metrics.rank_state() for metrics in ranks]  # what the engines' gather carries
    results = []
    for metrics in ranks:
        metrics.take_ranks(states)
        results.append(metrics.result())
    for name, expected in (("actor/dpo_accuracy", 0.5), ("actor/dpo_margin", 0.07)):
        # The core's collect_mean_metrics averages the ranks' results.
        assert sum(r[name] for r in results) / len(results) == pytest.approx(expected)
