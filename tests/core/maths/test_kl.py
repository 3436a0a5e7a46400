"""KL by a registered estimator, KL penalty in the reward, and the KL controllers."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk.core.maths.kl import (
    AdaptiveKLController,
    FixedKLController,
    apply_kl_penalty,
    build_kl_controller,
    token_kl,
)

# d = log_prob - ref_log_prob = [0.5, -1.0]
LOG_PROB = torch.tensor([[-1.0, -2.0]])
REF = torch.tensor([[-1.5, -1.0]])
MASK = torch.ones(1, 2)


def test_masked_garbage_does_not_leak() -> None:
    log_prob = torch.tensor([[-1.0, float("inf")]])
    ref = torch.tensor([[-2.0, float("nan")]])
    out = token_kl(log_prob, ref, torch.tensor([[1, 0]]), "k3")
    torch.testing.assert_close(out, torch.tensor([[math.exp(-1.0) + 1.0 - 1, 0.0]]))


def test_apply_kl_penalty_by_hand() -> None:
    scores = torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    log_prob = torch.tensor([[-1.0, -1.0, -1.0], [-2.0, -2.0, 9.0]])
    ref = torch.tensor([[-1.5, -0.5, -1.0], [-1.0, -3.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    rewards, metrics = apply_kl_penalty(scores, log_prob, ref, mask, 0.1, "k1")
    # k1 = [[0.5, -0.5, 0], [-1, 1, masked]]
    torch.testing.assert_close(rewards, torch.tensor([[-0.05, 0.05, 1.0], [0.1, 1.9, 0.0]]))
    assert metrics["kl"] == pytest.approx((0.0 / 3 + 0.0 / 2) / 2)
    assert metrics["kl_coef"] == 0.1
    _, metrics = apply_kl_penalty(scores, log_prob, ref, mask, 0.1, "abs")
    assert metrics["kl"] == pytest.approx((1.0 / 3 + 2.0 / 2) / 2)
    assert metrics["kl_penalty"] == pytest.approx((0.1 + 0.2) / 2)


def test_unknown_estimator_lists_names() -> None:
    with pytest.raises(HfsdkError, match="k3"):
        token_kl(LOG_PROB, REF, MASK, "k4")


def test_adaptive_controller_by_hand_and_checkpoint() -> None:
    ctl = AdaptiveKLController(0.2, target_kl=6.0, horizon=10000)
    # 9/6 - 1 = 0.5 -> clipped to 0.2
    assert ctl.update(9.0, 256) == pytest.approx(0.2 * (1 + 0.2 * 256 / 10000))
    # 5.4/6 - 1 = -0.1 (inside the clip range)
    expected = 0.2 * (1 + 0.2 * 256 / 10000) * (1 - 0.1 * 128 / 10000)
    assert ctl.update(5.4, 128) == pytest.approx(expected)

    restored = AdaptiveKLController(1.0, target_kl=1.0, horizon=1)
    restored.load_state_dict(ctl.state_dict())
    assert restored.update(3.0, 64) == ctl.update(3.0, 64)
    with pytest.raises(HfsdkError, match="same kl_controller"):
        FixedKLController(0.1).load_state_dict(ctl.state_dict())
    with pytest.raises(HfsdkError, match="must be finite"):
        ctl.update(float("nan"), 1)


def test_fixed_controller_and_factory() -> None:
    ctl = build_kl_controller("fixed", 0.05)
    assert isinstance(ctl, FixedKLController)
    assert ctl.update(100.0, 1000) == 0.05
    other = FixedKLController(0.0)
    other.load_state_dict(ctl.state_dict())
    assert other.value == 0.05
    assert isinstance(build_kl_controller("adaptive", 0.05, 0.1, 100), AdaptiveKLController)
    with pytest.raises(HfsdkError, match="'fixed' or 'adaptive'"):
        build_kl_controller("pid", 0.05)


def test_an_update_that_would_flip_the_coefficients_sign_is_refused() -> None:
    """Before: kl_coef 0.05 went to -0.155, then 0.479, -1.48 (horizon 200, 4096 samples)."""
    ctl = AdaptiveKLController(0.05, target_kl=0.1, horizon=200)
    with pytest.raises(HfsdkError, match=r"kl_horizon=200 is too small for 4096 samples .* 819"):
        ctl.update(0.0, 4096)
    assert ctl.value == 0.05  # unchanged
    assert ctl.update(0.0, 999) == pytest.approx(0.05 * (1 - 0.2 * 999 / 200))  # still > 0
