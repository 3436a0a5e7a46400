"""``nll`` equals the hand-computed negative log-likelihood, value and gradient."""

from __future__ import annotations

import pytest
import torch

from hfsdk import LossAggregation
from hfsdk_sft.losses import nll_loss


def test_nll_value_and_gradient_equal_the_hand_computation() -> None:
    gen = torch.Generator().manual_seed(0)
    log_prob = (-torch.rand(3, 4, generator=gen, dtype=torch.float64) * 2).requires_grad_(True)
    mask = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 1, 0]], dtype=torch.float64)
    unused = torch.full((3, 4), 7.0, dtype=torch.float64)  # advantages/old log-probs: ignored
    loss, metrics = nll_loss(
        log_prob=log_prob, old_log_prob=unused, advantages=unused, response_mask=mask
    )
    loss.backward()
    tokens = float(mask.sum())
    values = log_prob.detach()
    expected = -sum(float(values[i, t]) for i in range(3) for t in range(4) if mask[i, t]) / tokens
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-12)
    assert torch.allclose(log_prob.grad, -mask / tokens)
    assert metrics["nll"] == pytest.approx(expected)
    # seq-mean-token-mean: every row weighs the same whatever its length.
    seq_loss, _ = nll_loss(
        log_prob=log_prob.detach(), old_log_prob=unused, advantages=unused,
        response_mask=mask, aggregation=LossAggregation(mode="seq-mean-token-mean"),
    )  # fmt: skip
    per_row = [
        -sum(float(values[i, t]) for t in range(4) if mask[i, t]) / float(mask[i].sum())
        for i in range(3)
    ]
    assert float(seq_loss) == pytest.approx(sum(per_row) / 3, rel=1e-12)
