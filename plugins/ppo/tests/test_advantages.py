"""GAE: hand-computed values, a reference loop, masks with holes, masked garbage, errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk_ppo.advantages import GAEConfig, compute_gae

RAW = GAEConfig(gamma=1.0, lam=0.95, whiten_advantages=False)


def reference_gae(
    rewards: list[float], values: list[float], gamma: float, lam: float
) -> list[float]:
    """Textbook GAE over one fully valid sequence."""
    advantages, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        next_value = values[t + 1] if t + 1 < len(rewards) else 0.0
        running = rewards[t] + gamma * next_value - values[t] + gamma * lam * running
        advantages[t] = running
    return advantages


def test_gae_by_hand() -> None:
    adv, ret = compute_gae(
        token_level_rewards=torch.tensor([[0.0, 0.0, 1.0]]),
        values=torch.tensor([[0.5, 0.6, 0.7]]),
        response_mask=torch.ones(1, 3),
        config=RAW,
    )
    # δ = [0.1, 0.1, 0.3]; A2 = 0.3, A1 = 0.1 + 0.95·0.3, A0 = 0.1 + 0.95·A1
    torch.testing.assert_close(adv, torch.tensor([[0.46575, 0.385, 0.3]]))
    torch.testing.assert_close(ret, torch.tensor([[0.96575, 0.985, 1.0]]))


def test_gae_matches_reference_loop_with_padding() -> None:
    rewards = [[0.1, -0.2, 0.3, 1.0], [0.5, 2.0, 0.0, 0.0]]
    values = [[0.2, 0.4, -0.1, 0.3], [1.0, -0.5, 0.0, 0.0]]
    lengths = [4, 2]
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    config = GAEConfig(gamma=0.9, lam=0.8, whiten_advantages=False)
    adv, ret = compute_gae(
        token_level_rewards=torch.tensor(rewards, dtype=torch.float64),
        values=torch.tensor(values, dtype=torch.float64),
        response_mask=mask,
        config=config,
    )
    for i, n in enumerate(lengths):
        expected = reference_gae(rewards[i][:n], values[i][:n], 0.9, 0.8)
        assert adv[i, :n].tolist() == pytest.approx(expected)
        assert ret[i, :n].tolist() == pytest.approx(
            [a + v for a, v in zip(expected, values[i][:n], strict=True)]
        )
        assert adv[i, n:].tolist() == [0.0] * (4 - n)


def test_mask_holes_are_skipped() -> None:
    adv, _ = compute_gae(
        token_level_rewards=torch.tensor([[0.0, 0.0, 1.0, 5.0]]),
        values=torch.tensor([[0.5, 9.0, 0.7, 9.0]]),
        response_mask=torch.tensor([[1, 0, 1, 0]]),
        config=RAW,
    )
    # Only tokens 0 and 2 exist: A2 = 1 − 0.7 = 0.3; A0 = (0.7 − 0.5) + 0.95·0.3
    torch.testing.assert_close(adv, torch.tensor([[0.2 + 0.95 * 0.3, 0.0, 0.3, 0.0]]))


def test_whitening_over_valid_tokens() -> None:
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    kwargs = {
        "token_level_rewards": torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]]),
        "values": torch.tensor([[0.5, 0.6, 0.7], [0.1, 0.2, 0.0]]),
        "response_mask": mask,
    }
    raw, _ = compute_gae(**kwargs, config=RAW)
    white, _ = compute_gae(**kwargs, config=GAEConfig(gamma=1.0, lam=0.95))
    valid = raw[mask.bool()].tolist()
    mean = sum(valid) / len(valid)
    std = math.sqrt(sum((v - mean) ** 2 for v in valid) / (len(valid) - 1) + 1e-8)
    assert white[mask.bool()].tolist() == pytest.approx([(v - mean) / std for v in valid])
    assert white[1, 2].item() == 0.0


def test_all_masked_row_and_single_token_give_no_nan() -> None:
    adv, ret = compute_gae(
        token_level_rewards=torch.tensor([[1.0, 0.0], [float("nan"), 0.0]]),
        values=torch.tensor([[0.5, 0.0], [float("inf"), 0.0]]),
        response_mask=torch.tensor([[1, 0], [0, 0]]),
    )
    assert torch.isfinite(adv).all() and torch.isfinite(ret).all()
    assert ret.tolist() == [[1.0, 0.0], [0.0, 0.0]]


def test_errors() -> None:
    with pytest.raises(HfsdkError, match="needs values"):
        compute_gae(token_level_rewards=torch.zeros(1, 2), response_mask=torch.ones(1, 2))
    with pytest.raises(HfsdkError, match="values has shape"):
        compute_gae(
            token_level_rewards=torch.zeros(1, 2),
            values=torch.zeros(1, 3),
            response_mask=torch.ones(1, 2),
        )
    with pytest.raises(ValueError, match="gamma"):
        GAEConfig(gamma=1.5)


def test_registered_as_gae() -> None:
    entry = hfsdk.get_registry("advantage_estimators").get("gae")
    assert entry.impl is compute_gae and entry.config_cls is GAEConfig
    assert entry.plugin == "ppo"


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    whiten=st.booleans(),
    garbage=st.sampled_from([float("nan"), float("inf"), -1e30, 7.0]),
)
def test_masked_positions_never_change_outputs(seed: int, whiten: bool, garbage: float) -> None:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(4, 5, generator=gen) > 0.4
    rewards, values = torch.randn(4, 5, generator=gen), torch.randn(4, 5, generator=gen)
    fill = torch.full((4, 5), garbage)
    config = GAEConfig(gamma=0.99, lam=0.9, whiten_advantages=whiten)
    clean = compute_gae(
        token_level_rewards=rewards, values=values, response_mask=mask, config=config
    )
    dirty = compute_gae(
        token_level_rewards=torch.where(mask, rewards, fill),
        values=torch.where(mask, values, fill),
        response_mask=mask,
        config=config,
    )
    for a, b in zip(clean, dirty, strict=True):
        assert torch.equal(a, b)
        assert torch.isfinite(a).all()
        assert (a[~mask] == 0).all()
