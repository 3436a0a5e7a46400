"""Generalised Advantage Estimation (GAE), the ``gae`` advantage estimator.

For each sequence, walking backwards over its *valid* response tokens only
(masked positions are skipped, so a mask with holes, e.g. multi-turn tool
output, is handled)::

    δ_t = r_t + γ · V_next − V_t
    A_t = δ_t + γ · λ · A_next
    returns_t = A_t + V_t

where ``V_next`` / ``A_next`` belong to the next valid token (0 after the
last). Advantages are then whitened over all valid tokens of the batch
(``whiten_advantages``); returns are not.
"""

from __future__ import annotations

import attrs
import torch

from hfsdk import (
    AdvantageResult,
    HfsdkError,
    as_bool_mask,
    check_token_tensors,
    help_field,
    masked_fill_zero,
    masked_whiten,
)


@attrs.frozen(kw_only=True)
class GAEConfig:
    """Settings of the ``gae`` estimator."""

    gamma: float = help_field(
        "Discount γ of GAE (Schulman et al., 2016); 1 for episodic RLHF.",
        default=1.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)],
    )
    lam: float = help_field(
        "GAE's λ: bias-variance trade-off of the advantage (0: TD, 1: Monte Carlo).",
        default=0.95,
        validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)],
    )
    whiten_advantages: bool = help_field(
        "Normalise advantages to mean 0, std 1 over the batch's valid tokens.",
        default=True,
    )


def require_values(name: str, values: torch.Tensor | None) -> torch.Tensor:
    """``values`` or a clear error saying the estimator needs a critic."""
    if values is None:
        raise HfsdkError(
            f"advantage estimator {name!r} needs values (B, T) from a critic, but none were "
            "given; use an algorithm with a critic or a critic-free estimator such as 'grpo'"
        )
    return values


def gae_advantages_and_returns(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Un-whitened GAE advantages and returns (0 where masked); see the module docstring."""
    mask = as_bool_mask(response_mask)
    rewards = masked_fill_zero(token_level_rewards, mask)
    values = masked_fill_zero(values, mask)
    batch, length = rewards.shape
    advantages = torch.zeros_like(rewards)
    next_value = torch.zeros(batch, dtype=rewards.dtype, device=rewards.device)
    next_advantage = torch.zeros_like(next_value)
    for t in reversed(range(length)):
        valid = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage = delta + gamma * lam * next_advantage
        advantages[:, t] = torch.where(valid, advantage, torch.zeros_like(advantage))
        # Masked positions pass the next valid token's value and advantage through unchanged.
        next_value = torch.where(valid, values[:, t], next_value)
        next_advantage = torch.where(valid, advantage, next_advantage)
    returns = masked_fill_zero(advantages + values, mask)
    return advantages, returns


def compute_gae(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    values: torch.Tensor | None = None,
    config: GAEConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """GAE advantages (whitened unless disabled) and returns, both (B, T), 0 where masked.

    Needs the critic's ``values``; other inputs (``group_index``, ...) are ignored.
    """
    config = config or GAEConfig()
    values = require_values("gae", values)
    check_token_tensors(response_mask, token_level_rewards=token_level_rewards, values=values)
    with torch.no_grad():
        advantages, returns = gae_advantages_and_returns(
            token_level_rewards, values, response_mask, config.gamma, config.lam
        )
        if config.whiten_advantages:
            advantages = masked_whiten(advantages, response_mask)
    return AdvantageResult(advantages=advantages, returns=returns)
