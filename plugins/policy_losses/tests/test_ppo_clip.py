"""ppo_clip: hand-computed losses, clip fractions and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk_policy_losses.losses import PPOClipConfig, ppo_clip_loss

RATIOS = [1.5, 0.5, 1.1, 5.0]
ADV = [1.0, -1.0, 2.0, -1.0]


def run_ppo(config: PPOClipConfig, ratios: list[float], adv: list[float]):
    old = torch.zeros(1, len(ratios))
    log_prob = torch.tensor([[math.log(r) for r in ratios]], requires_grad=True)
    loss, metrics = ppo_clip_loss(
        log_prob=log_prob,
        old_log_prob=old,
        advantages=torch.tensor([adv]),
        response_mask=torch.ones(1, len(ratios)),
        config=config,
    )
    loss.backward()
    return loss.item(), metrics, log_prob.grad[0].tolist()


def test_ppo_clip_by_hand() -> None:
    loss, metrics, grad = run_ppo(PPOClipConfig(), RATIOS, ADV)
    # per token: clip to 1.2 -> -1.2; clip to 0.8 -> 0.8; unclipped -2.2; dual clip 5 -> 3
    assert loss == pytest.approx((-1.2 + 0.8 - 2.2 + 3.0) / 4)
    assert metrics["pg_clipfrac"] == pytest.approx(2 / 4)
    assert metrics["pg_clipfrac_lower"] == pytest.approx(1 / 4)
    assert metrics["ppo_kl"] == pytest.approx(-sum(math.log(r) for r in RATIOS) / 4)
    # Only the unclipped token has a gradient: d(−A·ρ)/dlogρ = −A·ρ, over 4 tokens.
    assert grad == pytest.approx([0.0, 0.0, -2.2 / 4, 0.0])


def test_without_dual_clip_the_large_ratio_counts_fully() -> None:
    loss, metrics, _ = run_ppo(PPOClipConfig(clip_ratio_c=None), RATIOS, ADV)
    assert loss == pytest.approx((-1.2 + 0.8 - 2.2 + 5.0) / 4)
    assert metrics["pg_clipfrac_lower"] == 0.0


def test_asymmetric_clip_ratios() -> None:
    # ρ = 1.25, A = 1: inside 1 + 0.28 (clip-higher), clipped at 1 + 0.2.
    loose, m_loose, _ = run_ppo(PPOClipConfig(clip_ratio_high=0.28), [1.25], [1.0])
    tight, m_tight, _ = run_ppo(PPOClipConfig(), [1.25], [1.0])
    assert (loose, m_loose["pg_clipfrac"]) == (pytest.approx(-1.25), 0.0)
    assert (tight, m_tight["pg_clipfrac"]) == (pytest.approx(-1.2), 1.0)
    # ρ = 0.7, A = −1: clip-low 0.4 leaves it alone, 0.2 clips it to 0.8.
    low, _, _ = run_ppo(PPOClipConfig(clip_ratio_low=0.4), [0.7], [-1.0])
    assert low == pytest.approx(0.7)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="dual-clip constant must be > 1"):
        PPOClipConfig(clip_ratio_c=0.5)
    with pytest.raises(ValueError, match="clip_ratio_low"):
        PPOClipConfig(clip_ratio_low=1.0)
