"""The Lagrange multiplier: update rule by hand, window, delay, cap, checkpoint."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_safe_rlhf.lagrange import LagrangeConfig, LagrangeMultiplier
from hfsdk_safe_rlhf.safe_rlhf_config import SafeRLHFConfig


def test_update_rule_and_window_by_hand() -> None:
    mult = LagrangeMultiplier(
        LagrangeConfig(cost_threshold=0.5, lambda_init=1.0, lambda_lr=0.1, episode_cost_window=3)
    )
    metrics = mult.update([1.0, 2.0])  # window mean 1.5, violation 1.0
    log_lambda = 0.1 * 1.0 * 1.0
    assert mult.value == pytest.approx(math.exp(log_lambda))
    assert metrics["lagrange/mean_episode_cost"] == pytest.approx(1.5)
    mult.update(torch.tensor([0.0, -1.0]))  # window [2, 0, -1]: 1.0 dropped, mean 1/3
    log_lambda += 0.1 * (1 / 3 - 0.5) * math.exp(log_lambda)
    assert mult.value == pytest.approx(math.exp(log_lambda))
    assert mult.value < math.exp(0.1)  # constraint satisfied: λ shrinks


def test_delay_and_cap() -> None:
    mult = LagrangeMultiplier(
        LagrangeConfig(lambda_init=1.0, lambda_lr=1.0, lambda_update_delay=2, lambda_max=2.0)
    )
    assert mult.update([5.0])["lagrange/lambda"] == 1.0
    assert mult.update([5.0])["lagrange/lambda"] == 1.0
    assert mult.update([5.0])["lagrange/lambda"] == pytest.approx(2.0)  # e^5 capped at 2


def test_a_runaway_multiplier_stops_with_what_to_set() -> None:
    mult = LagrangeMultiplier(LagrangeConfig(lambda_lr=0.5))
    with pytest.raises(HfsdkError, match=r"overflowed .* set lambda_max"):
        for _ in range(50):  # each step grows with λ: e, e^e/2, ... overflows within a few
            mult.update([1.0])
    assert math.isfinite(mult.value)  # the last good value stays
    capped = LagrangeMultiplier(LagrangeConfig(lambda_lr=0.5, lambda_max=10.0))
    for _ in range(50):
        capped.update([1.0])
    assert capped.value == pytest.approx(10.0)


def test_checkpoint_resumes_exactly() -> None:
    config = LagrangeConfig(cost_threshold=0.2, lambda_lr=0.05, episode_cost_window=4)
    a = LagrangeMultiplier(config)
    for costs in ([0.5, 0.1], [0.9], [0.3, 0.3, 0.3]):
        a.update(costs)
    b = LagrangeMultiplier(config)
    b.load_state_dict(a.state_dict())
    assert a.update([0.7, 0.0]) == b.update([0.7, 0.0])
    assert a.state_dict() == b.state_dict()
    with pytest.raises(HfsdkError, match="lacks"):
        b.load_state_dict({"log_lambda": 0.0})


def test_bad_input() -> None:
    mult = LagrangeMultiplier()
    with pytest.raises(HfsdkError, match="non-finite values at episodes \\[1\\]"):
        mult.update([0.0, float("nan")])
    with pytest.raises(HfsdkError, match="empty"):
        mult.update([])
    with pytest.raises(HfsdkError, match="above lambda_max"):
        LagrangeMultiplier(LagrangeConfig(lambda_init=3.0, lambda_max=2.0))


def test_config_from_algorithm_config() -> None:
    config = LagrangeConfig.from_config(SafeRLHFConfig(cost_threshold=0.3, lambda_lr=0.2))
    assert (config.cost_threshold, config.lambda_lr) == (0.3, 0.2)


def test_lambda_bounds_are_refused_when_the_config_loads() -> None:
    from hfsdk import ConfigError
    from hfsdk.core.config import load_run_config

    # Before: a negative lambda_max was an internal error after the models were built, and
    # one below lambda_init was refused only then, without the key's name.
    with pytest.raises(ConfigError, match=r"^bad value for config key 'algorithm.lambda_max': mu"):
        load_run_config("safe_rlhf", None, ["algorithm.lambda_max=-1"])
    with pytest.raises(ConfigError, match=r"lower algorithm.lambda_init or raise algorithm.la"):
        load_run_config("safe_rlhf", None, ["algorithm.lambda_max=0.5"])


def test_loss_is_logged_at_the_lambda_being_stepped() -> None:
    # Before: the loss read λ after the step, e^0.5 = 1.6487 instead of the documented
    # −(J_c − d)·λ = −(1 − 0)·1 at the λ the gradient was taken at.
    metrics = LagrangeMultiplier(LagrangeConfig(lambda_lr=0.5)).update([1.0])
    assert metrics["lagrange/loss"] == -1.0
    assert metrics["lagrange/lambda"] == pytest.approx(math.exp(0.5))


def test_lambda_past_float32_is_refused() -> None:
    # Before: only log λ > log(1e300) was refused, and with the defaults log λ jumped from
    # below float32's 88.7 to 275.9 at step 63, turning every advantage into NaN.
    mult = LagrangeMultiplier(LagrangeConfig())
    with pytest.raises(HfsdkError, match=r"overflowed .* set lambda_max"):
        for _ in range(63):
            mult.update([0.17])
    assert mult.value <= torch.finfo(torch.float32).max


def test_lambda_recovers_after_a_step_down_from_a_huge_value() -> None:
    # Before: one step under budget from λ = 1e30 moved log λ by −1e29, λ became exactly 0
    # and stayed 0 under any later violation: the cost constraint was silently off.
    mult = LagrangeMultiplier(LagrangeConfig(lambda_max=1e30))
    for _ in range(63):
        mult.update([0.17])
    assert mult.value == pytest.approx(1e30)
    mult.update([-1.0] * 16)  # the whole window under the threshold 0
    floor = mult.value
    assert floor > 0.0
    for _ in range(50):
        before = mult.value
        if mult.update([5.0])["lagrange/constraint_violation"] > 0:  # after 3 steps
            assert mult.value > before
    assert mult.value > floor


def test_the_floor_never_lifts_lambda_above_a_smaller_start_or_cap() -> None:
    """A start below float32 ε shrinks under budget; a cap below it still caps."""
    small = LagrangeMultiplier(LagrangeConfig(lambda_init=1e-9, cost_threshold=1.0))
    small.update([0.0])
    assert small.value <= 1e-9 * (1 + 1e-12)
    capped = LagrangeMultiplier(LagrangeConfig(lambda_init=1e-9, lambda_max=1e-8))
    for _ in range(5):
        capped.update([5.0])
    assert capped.value <= 1e-8 * (1 + 1e-9)
