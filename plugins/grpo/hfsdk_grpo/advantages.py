"""Critic-free advantage estimators: ``grpo`` (and Dr.GRPO), ``rloo``, REINFORCE++.

Each sequence's score is the sum of its token-level rewards over valid
tokens; ``group_index`` says which samples answer the same prompt. All
estimators broadcast a per-sequence advantage over the sequence's valid
tokens (REINFORCE++ works per token) and return 0 at masked positions.

- ``grpo``: A_i = (s_i − mean_g) / (std_g + ε); ``norm_by_std: false`` gives
  Dr.GRPO's advantage A_i = s_i − mean_g (Dr.GRPO also needs
  ``algorithm.loss_agg_mode: seq-mean-token-sum-norm``). std is the unbiased sample std
  of the group.
- ``rloo``: A_i = s_i − mean of the *other* samples = n/(n−1)·(s_i − mean_g).
- ``reinforce_plus_plus``: discounted return G_t = r_t + γ·G_{t+1} per token,
  whitened over all valid tokens of the batch.
- ``reinforce_plus_plus_baseline``: s_i − mean_g, broadcast, then whitened
  over all valid tokens of the batch.

A group of one sample has no baseline: its advantage is 0 (before whitening).
Returns equal the advantages, except for ``reinforce_plus_plus`` (returns G).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import attrs
import torch

from hfsdk import (
    AdvantageResult,
    HfsdkError,
    as_bool_mask,
    check_per_sample,
    check_token_tensors,
    help_field,
    masked_fill_zero,
    masked_whiten,
)


@attrs.frozen(kw_only=True)
class GRPOAdvantageConfig:
    """Settings of the ``grpo`` estimator; ``norm_by_std: false`` is Dr.GRPO's advantage.

    Dr.GRPO itself also aggregates with ``algorithm.loss_agg_mode: seq-mean-token-sum-norm``.
    """

    norm_by_std: bool = help_field(
        "Divide by the group's reward std (GRPO; Shao et al., 2024); false gives Dr.GRPO's "
        "advantage (Liu et al., 2025), which with algorithm.loss_agg_mode: "
        "seq-mean-token-sum-norm is Dr.GRPO.",
        default=True,
    )
    epsilon: float = help_field(
        "Added to the std before dividing (keeps identical groups finite).",
        default=1e-6,
        validator=attrs.validators.ge(0.0),
    )


def unused_epsilon_problems(config: Any) -> list[str] | None:
    """``advantage.epsilon`` set while ``norm_by_std`` is false: it only guards the std
    division, which Dr.GRPO's advantage skips, so it would change nothing
    (``hfsdk_validate_config`` messages)."""
    estimator = getattr(getattr(config, "algorithm", None), "advantage_estimator", None)
    advantage = getattr(config, "advantage", None)
    if estimator != "grpo" or not isinstance(advantage, GRPOAdvantageConfig):
        return None
    if advantage.norm_by_std:
        return None
    default = attrs.fields(GRPOAdvantageConfig).epsilon.default
    if advantage.epsilon == default:
        return None
    return [
        f"advantage.epsilon={advantage.epsilon!r} with advantage.norm_by_std=false: epsilon "
        "only guards the division by the group's reward std, which norm_by_std=false "
        "(Dr.GRPO) skips, so it would change nothing; remove advantage.epsilon, or set "
        "advantage.norm_by_std=true to divide by the std"
    ]


@attrs.frozen(kw_only=True)
class RLOOConfig:
    """Settings of the ``rloo`` estimator (it has none to tune)."""


@attrs.frozen(kw_only=True)
class ReinforcePlusPlusConfig:
    """Settings of the ``reinforce_plus_plus`` estimator."""

    gamma: float = help_field(
        "Discount of the per-token return G_t = r_t + γ·G_{t+1} (REINFORCE++; Hu, 2025).",
        default=1.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)],
    )


@attrs.frozen(kw_only=True)
class ReinforcePlusPlusBaselineConfig:
    """Settings of the ``reinforce_plus_plus_baseline`` estimator (it has none to tune)."""


def sequence_scores(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Each sequence's score: the sum of its rewards over valid tokens, (B,)."""
    return masked_fill_zero(token_level_rewards, response_mask).sum(dim=-1)


def group_ids(
    group_index: Sequence[Hashable] | None, batch_size: int, estimator: str
) -> torch.Tensor:
    """Dense integer ids (B,) for the hashable prompt ids in ``group_index``."""
    if group_index is None:
        raise HfsdkError(
            f"advantage estimator {estimator!r} needs group_index, one prompt id per sample, so "
            "it can compare the samples of the same prompt"
        )
    if isinstance(group_index, torch.Tensor):
        group_index = group_index.tolist()
    check_per_sample("group_index", group_index, batch_size)
    dense: dict[Hashable, int] = {}
    try:
        ids = [dense.setdefault(key, len(dense)) for key in group_index]
    except TypeError as exc:
        raise HfsdkError(
            f"group_index holds an unhashable value ({exc}); expected prompt ids such as "
            "strings or integers"
        ) from None
    return torch.tensor(ids, dtype=torch.long)


def group_stats(scores: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per-sample group size, group mean and unbiased group std (0 for groups of one).

    A group whose scores are all equal has exactly that score as its mean and std 0: a
    float32 sum / count is not exactly 1.2 for eight 1.2s, and that rounding divided by
    a std of the same size gave every sample of a solved prompt an advantage of +0.1.
    """
    n_groups = int(ids.max().item()) + 1 if ids.numel() else 0
    ids = ids.to(scores.device)
    wide = scores.double()
    count = torch.zeros(n_groups, dtype=wide.dtype, device=wide.device).index_add_(
        0, ids, torch.ones_like(wide)
    )
    mean = torch.zeros_like(count).index_add_(0, ids, wide) / count
    low = torch.full_like(count, math.inf).scatter_reduce(0, ids, wide, "amin")
    equal = (low == torch.full_like(count, -math.inf).scatter_reduce(0, ids, wide, "amax"))[ids]
    mean = torch.where(equal, wide, mean[ids])
    squared = torch.zeros_like(count).index_add_(0, ids, (wide - mean) ** 2)
    std = torch.where(equal, 0.0, torch.sqrt(squared / (count - 1).clamp(min=1))[ids])
    return tuple(t.to(scores.dtype) for t in (count[ids], mean, std))


def _broadcast(per_sequence: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    return masked_fill_zero(
        per_sequence.unsqueeze(-1).expand_as(response_mask).clone(), response_mask
    )


def _check(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> None:
    check_token_tensors(response_mask, token_level_rewards=token_level_rewards)


def compute_grpo_advantages(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_index: Sequence[Hashable] | None = None,
    config: GRPOAdvantageConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """GRPO: group-normalised sequence scores broadcast over tokens (Dr.GRPO's: no std)."""
    config = config or GRPOAdvantageConfig()
    _check(token_level_rewards, response_mask)
    with torch.no_grad():
        scores = sequence_scores(token_level_rewards, response_mask)
        count, mean, std = group_stats(scores, group_ids(group_index, len(scores), "grpo"))
        advantage = scores - mean
        if config.norm_by_std:  # an all-equal group: 0 (not 0/0 at epsilon 0)
            scale = std + config.epsilon
            advantage = torch.where(scale > 0, advantage / scale, torch.zeros_like(advantage))
        advantage = torch.where(count > 1, advantage, torch.zeros_like(advantage))
        advantages = _broadcast(advantage, response_mask)
    return AdvantageResult(advantages=advantages, returns=advantages.clone())


def compute_rloo_advantages(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_index: Sequence[Hashable] | None = None,
    config: RLOOConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """RLOO: each score minus the mean score of the other samples of its prompt."""
    _check(token_level_rewards, response_mask)
    with torch.no_grad():
        scores = sequence_scores(token_level_rewards, response_mask)
        count, mean, _ = group_stats(scores, group_ids(group_index, len(scores), "rloo"))
        advantage = count / (count - 1).clamp(min=1) * (scores - mean)
        advantage = torch.where(count > 1, advantage, torch.zeros_like(advantage))
        advantages = _broadcast(advantage, response_mask)
    return AdvantageResult(advantages=advantages, returns=advantages.clone())


def discounted_returns(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float
) -> torch.Tensor:
    """G_t = r_t + γ·G_next over valid tokens (masked positions skipped), 0 where masked."""
    mask = as_bool_mask(response_mask)
    rewards = masked_fill_zero(token_level_rewards, mask)
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(rewards.shape[1])):
        valid = mask[:, t]
        running = torch.where(valid, rewards[:, t] + gamma * running, running)
        returns[:, t] = torch.where(valid, running, torch.zeros_like(running))
    return returns


def compute_reinforce_plus_plus(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: ReinforcePlusPlusConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """REINFORCE++: discounted token returns, whitened over the batch's valid tokens."""
    config = config or ReinforcePlusPlusConfig()
    _check(token_level_rewards, response_mask)
    with torch.no_grad():
        returns = discounted_returns(token_level_rewards, response_mask, config.gamma)
        advantages = masked_whiten(returns, response_mask)
    return AdvantageResult(advantages=advantages, returns=returns)


def compute_reinforce_plus_plus_baseline(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_index: Sequence[Hashable] | None = None,
    config: ReinforcePlusPlusBaselineConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """REINFORCE++ with baseline: score minus group mean, broadcast, whitened over the batch."""
    _check(token_level_rewards, response_mask)
    with torch.no_grad():
        scores = sequence_scores(token_level_rewards, response_mask)
        ids = group_ids(group_index, len(scores), "reinforce_plus_plus_baseline")
        _, mean, _ = group_stats(scores, ids)
        advantages = masked_whiten(_broadcast(scores - mean, response_mask), response_mask)
    return AdvantageResult(advantages=advantages, returns=advantages.clone())
