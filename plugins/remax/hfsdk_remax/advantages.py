"""The ``remax`` advantage estimator (Li et al., 2023).

ReMax samples one response and also decodes greedily; the greedy response's
reward is the baseline. Per token::

    returns_t = Σ_{t' ≥ t} r_t'          (reverse cumulative sum over valid tokens)
    A_t = returns_t − b                   (b: the greedy response's reward)
"""

from __future__ import annotations

import attrs
import torch

from hfsdk import (
    AdvantageResult,
    HfsdkError,
    check_per_sample,
    check_token_tensors,
    masked_fill_zero,
)


@attrs.frozen(kw_only=True)
class ReMaxAdvantageConfig:
    """Settings of the ``remax`` estimator (it has none to tune)."""


def compute_remax_advantages(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    reward_baselines: torch.Tensor | None = None,
    config: ReMaxAdvantageConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """ReMax: reward-to-go minus the greedy baseline reward, both (B, T), 0 where masked."""
    check_token_tensors(response_mask, token_level_rewards=token_level_rewards)
    if reward_baselines is None:
        raise HfsdkError(
            "advantage estimator 'remax' needs reward_baselines (B,), the reward of each "
            "prompt's greedy response; the ReMax algorithm computes them"
        )
    reward_baselines = torch.as_tensor(reward_baselines)
    check_per_sample("reward_baselines", reward_baselines, token_level_rewards.shape[0])
    with torch.no_grad():
        rewards = masked_fill_zero(token_level_rewards, response_mask)
        # Masked rewards are 0, so a plain reverse cumsum skips them.
        returns = rewards.flip(-1).cumsum(-1).flip(-1)
        returns = masked_fill_zero(returns, response_mask)
        baseline = reward_baselines.to(rewards.dtype).unsqueeze(-1)
        advantages = masked_fill_zero(returns - baseline, response_mask)
    return AdvantageResult(advantages=advantages, returns=returns)
