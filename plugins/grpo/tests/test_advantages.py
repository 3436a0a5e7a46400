"""Group advantage estimators: hand-computed values, masks, singleton groups, errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk_grpo.advantages import (
    GRPOAdvantageConfig,
    ReinforcePlusPlusConfig,
    compute_grpo_advantages,
    compute_reinforce_plus_plus,
    compute_reinforce_plus_plus_baseline,
    compute_rloo_advantages,
)

NAN = float("nan")
# Scores (sum over valid tokens): a -> [1, 0, 0.5], b -> [2]; NaN sits at masked positions.
REWARDS = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, NAN], [0.25, 0.25, NAN], [2.0, NAN, NAN]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 0], [1, 0, 0]])
GROUPS = ["a", "a", "a", "b"]


def whiten_reference(valid: list[float]) -> list[float]:
    mean = sum(valid) / len(valid)
    std = math.sqrt(sum((v - mean) ** 2 for v in valid) / (len(valid) - 1) + 1e-8)
    return [(v - mean) / std for v in valid]


def expand(per_seq: list[float]) -> torch.Tensor:
    return torch.tensor(per_seq).unsqueeze(-1) * MASK


def test_grpo_by_hand() -> None:
    adv, ret = compute_grpo_advantages(
        token_level_rewards=REWARDS, response_mask=MASK, group_index=GROUPS
    )
    # group a: mean 0.5, unbiased std 0.5; group b has one sample -> 0.
    s = 0.5 / (0.5 + 1e-6)
    torch.testing.assert_close(adv, expand([s, -s, 0.0, 0.0]))
    torch.testing.assert_close(ret, adv)


def test_dr_grpo_skips_std() -> None:
    adv, _ = compute_grpo_advantages(
        token_level_rewards=REWARDS,
        response_mask=MASK,
        group_index=GROUPS,
        config=GRPOAdvantageConfig(norm_by_std=False),
    )
    torch.testing.assert_close(adv, expand([0.5, -0.5, 0.0, 0.0]))


def test_rloo_by_hand() -> None:
    adv, _ = compute_rloo_advantages(
        token_level_rewards=REWARDS, response_mask=MASK, group_index=GROUPS
    )
    # 1 − mean(0, 0.5) = 0.75; 0 − mean(1, 0.5) = −0.75; 0.5 − mean(1, 0) = 0.
    torch.testing.assert_close(adv, expand([0.75, -0.75, 0.0, 0.0]))


def test_reinforce_plus_plus_by_hand() -> None:
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, NAN]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv, ret = compute_reinforce_plus_plus(
        token_level_rewards=rewards,
        response_mask=mask,
        config=ReinforcePlusPlusConfig(gamma=0.5),
    )
    torch.testing.assert_close(ret, torch.tensor([[0.25, 0.5, 1.0], [1.0, 2.0, 0.0]]))
    expected = whiten_reference([0.25, 0.5, 1.0, 1.0, 2.0])
    assert adv[mask.bool()].tolist() == pytest.approx(expected)
    assert adv[1, 2].item() == 0.0


def test_reinforce_plus_plus_baseline_by_hand() -> None:
    adv, _ = compute_reinforce_plus_plus_baseline(
        token_level_rewards=REWARDS, response_mask=MASK, group_index=GROUPS
    )
    # per-token values before whitening: 0.5 ×3, −0.5 ×2, 0 ×2, 0 ×1
    expected = whiten_reference([0.5] * 3 + [-0.5] * 2 + [0.0] * 2 + [0.0])
    assert adv[MASK.bool()].tolist() == pytest.approx(expected)
    assert (adv[~MASK.bool()] == 0).all()


ESTIMATORS = [
    compute_grpo_advantages,
    compute_rloo_advantages,
    compute_reinforce_plus_plus,
    compute_reinforce_plus_plus_baseline,
]


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_singletons_and_all_masked_rows_give_no_nan(estimator) -> None:
    rewards = torch.tensor([[1.0, NAN], [NAN, NAN], [3.0, 0.0]])
    mask = torch.tensor([[1, 0], [0, 0], [1, 1]])
    adv, ret = estimator(token_level_rewards=rewards, response_mask=mask, group_index=[0, 1, 2])
    assert torch.isfinite(adv).all() and torch.isfinite(ret).all()
    if estimator is not compute_reinforce_plus_plus:
        assert (adv == 0).all()  # every group has one sample: no baseline, no signal


def test_identical_scores_in_a_group_give_zero_not_nan() -> None:
    adv, _ = compute_grpo_advantages(
        token_level_rewards=torch.ones(2, 2), response_mask=torch.ones(2, 2), group_index=[7, 7]
    )
    assert (adv == 0).all()


@pytest.mark.parametrize("score, n", [(1.2, 8), (0.7, 8), (1.96, 16), (0.1, 3)])
@pytest.mark.parametrize("epsilon", [1e-6, 0.0])
def test_an_all_equal_group_gets_exactly_zero_whatever_its_score(
    score: float, n: int, epsilon: float
) -> None:
    """A float32 mean of eight 1.2s is not 1.2; that rounding over a std of the same size
    gave every sample +0.1057 (and epsilon 0 gave NaN). Beside a group that differs."""
    scores = [score] * n + [0.0, 1.0]
    rewards = torch.tensor(scores).unsqueeze(-1)
    config = GRPOAdvantageConfig(epsilon=epsilon)
    groups = ["same"] * n + ["mixed"] * 2
    mask = torch.ones_like(rewards)
    adv, _ = compute_grpo_advantages(
        token_level_rewards=rewards, response_mask=mask, group_index=groups, config=config
    )
    assert adv[:n].eq(0).all(), adv[:n].flatten().tolist()
    assert adv[n:, 0].tolist() == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)], rel=1e-5)
    rloo, _ = compute_rloo_advantages(
        token_level_rewards=rewards, response_mask=mask, group_index=groups
    )
    assert rloo[:n].eq(0).all()
    baseline, _ = compute_reinforce_plus_plus_baseline(
        token_level_rewards=rewards, response_mask=mask, group_index=groups
    )
    assert baseline[:n].eq(baseline[0, 0]).all()  # whitened over the batch: one shared value


def test_group_index_errors() -> None:
    kwargs = {"token_level_rewards": torch.zeros(2, 2), "response_mask": torch.ones(2, 2)}
    with pytest.raises(HfsdkError, match="needs group_index"):
        compute_grpo_advantages(**kwargs)
    with pytest.raises(HfsdkError, match="group_index has 3 entries; expected 2"):
        compute_rloo_advantages(**kwargs, group_index=["a", "b", "c"])
    with pytest.raises(HfsdkError, match="unhashable"):
        compute_grpo_advantages(**kwargs, group_index=[["a"], ["b"]])
    with pytest.raises(HfsdkError, match="token_level_rewards has shape"):
        compute_grpo_advantages(
            token_level_rewards=torch.zeros(2, 3),
            response_mask=torch.ones(2, 2),
            group_index=[0, 0],
        )


def test_group_index_may_be_a_tensor_and_unused_inputs_are_ignored() -> None:
    adv, _ = compute_grpo_advantages(
        token_level_rewards=REWARDS,
        response_mask=MASK,
        group_index=torch.tensor([3, 3, 3, 4]),
        values=torch.zeros(4, 3),
    )
    s = 0.5 / (0.5 + 1e-6)
    torch.testing.assert_close(adv, expand([s, -s, 0.0, 0.0]))


def test_registered() -> None:
    registry = hfsdk.get_registry("advantage_estimators")
    for name, fn in zip(
        ["grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline"],
        ESTIMATORS,
        strict=True,
    ):
        assert registry.get(name).impl is fn
        assert registry.get(name).plugin == "grpo"
        assert registry.get(name).make_config() is not None


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    garbage=st.sampled_from([NAN, float("inf"), -1e30, 4.0]),
    n_groups=st.integers(1, 4),
)
def test_masked_positions_never_change_outputs(seed: int, garbage: float, n_groups: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(6, 4, generator=gen) > 0.4
    rewards = torch.randn(6, 4, generator=gen)
    groups = torch.randint(0, n_groups, (6,), generator=gen).tolist()
    dirty = torch.where(mask, rewards, torch.full_like(rewards, garbage))
    for estimator in ESTIMATORS:
        clean_out = estimator(token_level_rewards=rewards, response_mask=mask, group_index=groups)
        dirty_out = estimator(token_level_rewards=dirty, response_mask=mask, group_index=groups)
        for a, b in zip(clean_out, dirty_out, strict=True):
            assert torch.equal(a, b)
            assert torch.isfinite(a).all()
            assert (a[~mask] == 0).all()


@pytest.mark.parametrize("wrong", ["per_sequence", "tuple"])
def test_an_estimator_result_of_the_wrong_shape_is_one_line_naming_it(wrong: str) -> None:
    """A (B,) result passed the type check and failed inside the actor's update."""
    import attrs

    from hfsdk import AdvantageResult, Batch
    from hfsdk_testing import FakeRun

    def per_row(*, token_level_rewards, response_mask, group_index, config=None):
        scores = token_level_rewards.sum(-1)
        return (
            (scores, scores)
            if wrong == "tuple"
            else AdvantageResult(advantages=scores, returns=scores)
        )

    run = FakeRun.for_algorithm("grpo")
    algorithm = run.algorithm
    algorithm._advantage_estimator = attrs.evolve(algorithm._advantage_estimator, impl=per_row)
    mask = torch.ones(2, 3)
    batch = Batch.from_dict(
        tensors={"token_level_rewards": mask.clone(), "response_mask": mask},
        non_tensors={"uid": [0, 0]},
    )
    expected = "returned tuple" if wrong == "tuple" else r"returned shapes \[\(2,\), \(2,\)\]"
    with pytest.raises(HfsdkError, match=rf"estimator 'grpo' \(plugin 'grpo'\) {expected}; "):
        algorithm.estimate_advantages(batch)
