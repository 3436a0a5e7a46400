"""Safe-RLHF advantages: reward/cost GAE combined with λ, by hand; masked garbage; errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk_safe_rlhf.advantages import (
    SafeRLHFAdvantageConfig,
    compute_safe_rlhf_advantages,
    compute_safe_rlhf_terms,
)

CONFIG = SafeRLHFAdvantageConfig(gamma=1.0, lam=0.5)
INPUTS = {
    "token_level_rewards": torch.tensor([[0.0, 1.0, 7.0]]),
    "values": torch.tensor([[0.2, 0.5, 7.0]]),
    "token_level_costs": torch.tensor([[0.0, 2.0, 7.0]]),
    "cost_values": torch.tensor([[0.1, 1.0, 7.0]]),
    "response_mask": torch.tensor([[1, 1, 0]]),
}


def test_terms_by_hand() -> None:
    terms = compute_safe_rlhf_terms(**INPUTS, lagrange_multiplier=3.0, config=CONFIG)
    # reward: δ = [0.3, 0.5] -> A_r = [0.3 + 0.5·0.5, 0.5]; cost: δ = [0.9, 1.0] -> A_c = [1.4, 1.0]
    torch.testing.assert_close(terms.reward_advantages, torch.tensor([[0.55, 0.5, 0.0]]))
    torch.testing.assert_close(terms.cost_advantages, torch.tensor([[1.4, 1.0, 0.0]]))
    torch.testing.assert_close(terms.returns, torch.tensor([[0.75, 1.0, 0.0]]))
    torch.testing.assert_close(terms.cost_returns, torch.tensor([[1.5, 2.0, 0.0]]))
    expected = [[(0.55 - 3 * 1.4) / 4, (0.5 - 3 * 1.0) / 4, 0.0]]
    torch.testing.assert_close(terms.advantages, torch.tensor(expected))


def test_registered_estimator_returns_combined_advantages_and_reward_returns() -> None:
    adv, ret = compute_safe_rlhf_advantages(**INPUTS, lagrange_multiplier=0.0, config=CONFIG)
    torch.testing.assert_close(adv, torch.tensor([[0.55, 0.5, 0.0]]))  # λ = 0: A = A_r
    torch.testing.assert_close(ret, torch.tensor([[0.75, 1.0, 0.0]]))
    entry = hfsdk.get_registry("advantage_estimators").get("safe_rlhf")
    assert entry.impl is compute_safe_rlhf_advantages and entry.plugin == "safe_rlhf"


def test_whitening_switch() -> None:
    adv, _ = compute_safe_rlhf_advantages(
        **INPUTS, lagrange_multiplier=1.0, config=SafeRLHFAdvantageConfig(whiten_advantages=True)
    )
    valid = adv[0, :2]
    assert valid.sum().item() == pytest.approx(0.0, abs=1e-6)
    assert valid.std().item() == pytest.approx(1.0, rel=1e-4)


def test_errors() -> None:
    with pytest.raises(HfsdkError, match="needs lagrange_multiplier"):
        compute_safe_rlhf_advantages(**INPUTS)
    with pytest.raises(HfsdkError, match="finite number ≥ 0"):
        compute_safe_rlhf_advantages(**INPUTS, lagrange_multiplier=-1.0)
    partial = {k: v for k, v in INPUTS.items() if k != "cost_values"}
    with pytest.raises(HfsdkError, match="needs token_level_costs and cost_values"):
        compute_safe_rlhf_advantages(**partial, lagrange_multiplier=1.0)
    with pytest.raises(HfsdkError, match="cost_values has shape"):
        compute_safe_rlhf_advantages(
            **partial, cost_values=torch.zeros(1, 2), lagrange_multiplier=1.0
        )


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    lam=st.floats(0.0, 10.0),
    garbage=st.sampled_from([float("nan"), float("inf"), -1e30]),
)
def test_masked_positions_never_change_outputs(seed: int, lam: float, garbage: float) -> None:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(3, 4, generator=gen) > 0.4
    names = ["token_level_rewards", "values", "token_level_costs", "cost_values"]
    tensors = {n: torch.randn(3, 4, generator=gen) for n in names}
    dirty = {n: torch.where(mask, t, torch.full_like(t, garbage)) for n, t in tensors.items()}
    a = compute_safe_rlhf_terms(**tensors, response_mask=mask, lagrange_multiplier=lam)
    b = compute_safe_rlhf_terms(**dirty, response_mask=mask, lagrange_multiplier=lam)
    for name in ("advantages", "returns", "cost_returns"):
        assert torch.equal(getattr(a, name), getattr(b, name))
        assert torch.isfinite(getattr(a, name)).all()


@pytest.mark.parametrize("multiplier", [1e39, 1.7e308])
def test_a_huge_multiplier_weights_only_the_cost(multiplier: float) -> None:
    # Before: (A_r − λ·A_c)/(1 + λ) in float32 was inf/inf = NaN once λ passed 3.4e38.
    result = compute_safe_rlhf_advantages(**INPUTS, lagrange_multiplier=multiplier, config=CONFIG)
    assert torch.isfinite(result.advantages).all()
    torch.testing.assert_close(result.advantages, -result.extras["cost_advantages"])
