"""``dapo_clip`` without a config uses DAPO's bounds, not ``ppo_clip``'s defaults.

With ``config=None`` it forwarded nothing, and ``ppo_clip`` fell back to ε_high 0.2 and a
dual clip c=3: 0.2667 instead of DAPO's 0.7339 on the batch below.
"""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk import get_registry
from hfsdk_dapo.dapo_config import DAPOClipConfig


def _loss(config: DAPOClipConfig | None) -> tuple[float, dict[str, float]]:
    # Ratio e^0.25 ≈ 1.284 with A > 0 (clipped at 1.28, not at 1.2) and ratio e^1.5 ≈ 4.48
    # with A < 0 (no dual clip under DAPO, clipped at c=3 under ppo_clip's default).
    fn = get_registry("policy_losses")["dapo_clip"].impl
    loss, metrics = fn(
        log_prob=torch.tensor([[0.25, 0.0, 1.5]]),
        old_log_prob=torch.zeros(1, 3),
        advantages=torch.tensor([[1.0, 1.0, -1.0]]),
        response_mask=torch.ones(1, 3),
        config=config,
    )
    return float(loss), dict(metrics)


def test_no_config_uses_dapos_bounds() -> None:
    loss, metrics = _loss(None)
    expected, expected_metrics = _loss(DAPOClipConfig())
    assert loss == pytest.approx(expected)
    assert metrics == pytest.approx(expected_metrics)
    assert loss == pytest.approx((-1.28 - 1.0 + math.exp(1.5)) / 3)  # the hand-computed loss
