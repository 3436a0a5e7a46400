"""ReMax advantages: hand-computed values, masked garbage, errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk_remax.advantages import compute_remax_advantages


def test_remax_by_hand() -> None:
    adv, ret = compute_remax_advantages(
        token_level_rewards=torch.tensor([[0.0, 1.0, 2.0], [0.0, 3.0, float("nan")]]),
        response_mask=torch.tensor([[1, 1, 1], [1, 1, 0]]),
        reward_baselines=torch.tensor([1.5, 4.0]),
    )
    torch.testing.assert_close(ret, torch.tensor([[3.0, 3.0, 2.0], [3.0, 3.0, 0.0]]))
    torch.testing.assert_close(adv, torch.tensor([[1.5, 1.5, 0.5], [-1.0, -1.0, 0.0]]))


def test_all_masked_row_gives_zeros() -> None:
    adv, ret = compute_remax_advantages(
        token_level_rewards=torch.tensor([[float("inf"), 1.0]]),
        response_mask=torch.zeros(1, 2),
        reward_baselines=[2.0],
    )
    assert adv.tolist() == [[0.0, 0.0]] and ret.tolist() == [[0.0, 0.0]]


def test_errors() -> None:
    kwargs = {"token_level_rewards": torch.zeros(2, 3), "response_mask": torch.ones(2, 3)}
    with pytest.raises(HfsdkError, match="needs reward_baselines"):
        compute_remax_advantages(**kwargs)
    with pytest.raises(HfsdkError, match=r"reward_baselines has shape \(3,\); expected \(2,\)"):
        compute_remax_advantages(**kwargs, reward_baselines=torch.zeros(3))


def test_registered() -> None:
    entry = hfsdk.get_registry("advantage_estimators").get("remax")
    assert entry.impl is compute_remax_advantages and entry.plugin == "remax"


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), garbage=st.sampled_from([float("nan"), -1e30, 9.0]))
def test_masked_positions_never_change_outputs(seed: int, garbage: float) -> None:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(4, 5, generator=gen) > 0.4
    rewards, baselines = torch.randn(4, 5, generator=gen), torch.randn(4, generator=gen)
    dirty = torch.where(mask, rewards, torch.full_like(rewards, garbage))
    clean_out = compute_remax_advantages(
        token_level_rewards=rewards, response_mask=mask, reward_baselines=baselines
    )
    dirty_out = compute_remax_advantages(
        token_level_rewards=dirty, response_mask=mask, reward_baselines=baselines
    )
    for a, b in zip(clean_out, dirty_out, strict=True):
        assert torch.equal(a, b) and (a[~mask] == 0).all()
