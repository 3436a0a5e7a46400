"""GSPO: sequence-level ratio, clipping, gradients, masked garbage."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk import LossAggregation
from hfsdk.core.algorithm import LOSS_AGG_MODES
from hfsdk_grpo.losses import GSPOConfig, gspo_loss


def run(deltas: list[list[float]], adv: list[float], mask: list[list[int]], config=None):
    log_prob = torch.tensor(deltas, requires_grad=True)
    loss, metrics = gspo_loss(
        log_prob=log_prob,
        old_log_prob=torch.zeros(len(deltas), len(deltas[0])),
        advantages=torch.tensor(adv).unsqueeze(-1).expand(len(adv), len(deltas[0])).clone(),
        response_mask=torch.tensor(mask),
        config=config,
    )
    loss.backward()
    return loss.item(), metrics, log_prob.grad


def test_sequence_ratio_inside_the_clip_range() -> None:
    # Seq 0: mean log ratio 1e-4 (inside 1 ± 3e-4/4e-4); seq 1: 3 tokens, mean 0.
    loss, metrics, grad = run(
        [[1e-4, 1e-4, 5.0], [2e-4, -1e-4, -1e-4]], [1.0, -2.0], [[1, 1, 0], [1, 1, 1]]
    )
    s0 = math.exp(1e-4)
    # seq-mean-token-mean: ((−1·s0) + (2·1)) / 2
    assert loss == pytest.approx((-s0 + 2.0) / 2, rel=1e-6)
    assert metrics["pg_clipfrac"] == 0.0
    # Per-token gradient −A·s_i / |y_i| / N_seq.
    expected = torch.tensor([[-s0 / 2 / 2, -s0 / 2 / 2, 0.0], [2 / 3 / 2] * 3])
    torch.testing.assert_close(grad, expected)


def test_sequence_ratio_is_clipped_as_a_whole() -> None:
    # mean log ratio 0.2 -> s = e^0.2 = 1.2214, although one token alone would be e^0.1.
    loss, metrics, grad = run([[0.1, 0.3]], [1.0], [[1, 1]])
    assert loss == pytest.approx(-(1 + 4e-4))
    assert metrics["pg_clipfrac"] == 1.0
    assert metrics["ppo_kl"] == pytest.approx(-0.2)
    assert (grad == 0).all()
    loss, _, _ = run([[0.1, 0.3]], [1.0], [[1, 1]], GSPOConfig(clip_ratio_high=0.3))
    assert loss == pytest.approx(-math.exp(0.2), rel=1e-6)


def test_registered() -> None:
    entry = hfsdk.get_registry("policy_losses").get("gspo")
    assert entry.impl is gspo_loss and entry.config_cls is GSPOConfig


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    mode=st.sampled_from(LOSS_AGG_MODES),
    garbage=st.sampled_from([float("nan"), float("inf"), -1e30, 2.0]),
)
def test_masked_positions_never_change_loss(seed: int, mode: str, garbage: float) -> None:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(3, 4, generator=gen) > 0.5
    inputs = [torch.randn(3, 4, generator=gen) * 1e-3 for _ in range(3)]
    fill = torch.full((3, 4), garbage)

    def go(dirty: bool):
        lp, old, adv = (torch.where(mask, x, fill) if dirty else x for x in inputs)
        lp = lp.clone().requires_grad_(True)
        loss, metrics = gspo_loss(
            log_prob=lp,
            old_log_prob=old,
            advantages=adv,
            response_mask=mask,
            aggregation=LossAggregation(mode=mode),
        )
        loss.backward()
        return loss.detach(), metrics, lp.grad

    clean, dirty = go(False), go(True)
    assert torch.equal(clean[0], dirty[0]) and clean[1] == dirty[1]
    assert torch.equal(clean[2], dirty[2]) and torch.isfinite(clean[2]).all()
