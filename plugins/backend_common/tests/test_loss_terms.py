"""The entropy bonus and KL as a loss term (the backends' shared loss terms)."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk_backend_common.loss_terms import entropy_bonus, entropy_from_logits, kl_loss


def test_entropy_from_logits_by_hand() -> None:
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, math.log(3.0), -1e9, -1e9]])
    expected = [math.log(4.0), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))]
    torch.testing.assert_close(entropy_from_logits(logits), torch.tensor(expected))


def test_entropy_of_a_peaked_distribution_is_finite_and_tiny() -> None:
    out = entropy_from_logits(torch.tensor([1000.0, 0.0, -1000.0]))
    assert torch.isfinite(out)
    assert 0.0 <= out.item() < 1e-6


def test_entropy_bonus_by_hand() -> None:
    entropy = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    mask = torch.tensor([[1, 0], [1, 1]])
    loss, metrics = entropy_bonus(entropy, mask, "token-mean", entropy_coef=0.01)
    assert metrics["entropy"] == pytest.approx(8.0 / 3)
    assert loss.item() == pytest.approx(-0.01 * 8.0 / 3)
    loss, metrics = entropy_bonus(entropy, mask, "seq-mean-token-mean", entropy_coef=0.5)
    assert metrics["entropy"] == pytest.approx((1.0 + 3.5) / 2)
    assert loss.item() == pytest.approx(-0.5 * 2.25)


def test_kl_loss_aggregates_and_has_gradients() -> None:
    log_prob = torch.tensor([[-1.0, -2.0, 0.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -1.0, 0.0]])
    loss, metrics = kl_loss(log_prob, ref, torch.tensor([[1, 1, 0]]), "token-mean", "k2")
    assert loss.item() == pytest.approx((0.125 + 0.5) / 2)
    assert metrics["kl_loss"] == pytest.approx(loss.item())
    loss.backward()
    # d/dlogp ½ d² = d, averaged over 2 tokens.
    torch.testing.assert_close(log_prob.grad, torch.tensor([[0.25, -0.5, 0.0]]))
