"""The ``safe_rlhf`` advantage estimator (Dai et al., 2023; PPO-Lagrangian).

GAE (from the PPO plugin) runs twice, on the reward with the reward critic's
values and on the cost with the cost critic's values, and the two advantages
are combined with the Lagrange multiplier λ::

    A = (A_r − λ · A_c) / (1 + λ)

Dividing by 1 + λ keeps the scale of A bounded as λ grows; the weights
1/(1 + λ) and λ/(1 + λ) are formed as Python floats (both in [0, 1]), so A
stays finite for any finite λ, however large. The reward
returns (``returns``) train the reward critic; the cost returns, computed in
the same pass, come back in ``extras["cost_returns"]`` and train the cost
critic (with ``extras["reward_advantages"]`` and ``extras["cost_advantages"]``
for inspection).
"""

from __future__ import annotations

import math

import attrs
import torch

from hfsdk import (
    AdvantageResult,
    HfsdkError,
    check_token_tensors,
    help_field,
    masked_fill_zero,
    masked_whiten,
)
from hfsdk_ppo.advantages import gae_advantages_and_returns, require_values


@attrs.frozen(kw_only=True)
class SafeRLHFAdvantageConfig:
    """Settings of the ``safe_rlhf`` estimator (shared by the reward and the cost GAE)."""

    gamma: float = help_field(
        "Discount γ of both GAEs (reward and cost).",
        default=1.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)],
    )
    lam: float = help_field(
        "GAE's λ for both (reward and cost).",
        default=0.95,
        validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)],
    )
    whiten_advantages: bool = help_field(
        "Normalise the combined advantage over the batch's valid tokens.",
        default=False,
    )


@attrs.frozen(kw_only=True)
class SafeRLHFAdvantages:
    """Everything the Safe-RLHF step needs from one estimation, all (B, T), 0 where masked."""

    advantages: torch.Tensor
    returns: torch.Tensor
    cost_returns: torch.Tensor
    reward_advantages: torch.Tensor
    cost_advantages: torch.Tensor


def _multiplier(value: float | torch.Tensor | None) -> float:
    if value is None:
        raise HfsdkError(
            "advantage estimator 'safe_rlhf' needs lagrange_multiplier (λ ≥ 0), the current "
            "value of the Safe-RLHF multiplier (LagrangeMultiplier.value)"
        )
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise HfsdkError(f"lagrange_multiplier={value!r}; expected a finite number ≥ 0")
    return value


def _weights(lam: float) -> tuple[float, float]:
    """The reward and cost weights 1/(1 + λ) and λ/(1 + λ), both in [0, 1] for any λ ≥ 0."""
    # Dividing float32 tensors by 1 + λ gives inf/inf = NaN once λ passes float32's range;
    # in float64 scalars 1 + λ stays finite for any finite λ, and λ/(1 + λ) rounds to 1.
    reward_weight = 1.0 / (1.0 + lam)
    return reward_weight, lam * reward_weight


def compute_safe_rlhf_terms(
    *,
    token_level_rewards: torch.Tensor,
    token_level_costs: torch.Tensor | None,
    values: torch.Tensor | None,
    cost_values: torch.Tensor | None,
    response_mask: torch.Tensor,
    lagrange_multiplier: float | torch.Tensor | None,
    config: SafeRLHFAdvantageConfig | None = None,
) -> SafeRLHFAdvantages:
    """Reward and cost GAE and their λ-combination; see the module docstring."""
    config = config or SafeRLHFAdvantageConfig()
    values = require_values("safe_rlhf", values)
    if token_level_costs is None or cost_values is None:
        raise HfsdkError(
            "advantage estimator 'safe_rlhf' needs token_level_costs and cost_values (B, T) "
            "from the cost model and the cost critic"
        )
    check_token_tensors(
        response_mask,
        token_level_rewards=token_level_rewards,
        values=values,
        token_level_costs=token_level_costs,
        cost_values=cost_values,
    )
    reward_weight, cost_weight = _weights(_multiplier(lagrange_multiplier))
    with torch.no_grad():
        reward_adv, returns = gae_advantages_and_returns(
            token_level_rewards, values, response_mask, config.gamma, config.lam
        )
        cost_adv, cost_returns = gae_advantages_and_returns(
            token_level_costs, cost_values, response_mask, config.gamma, config.lam
        )
        advantages = masked_fill_zero(
            reward_weight * reward_adv - cost_weight * cost_adv, response_mask
        )
        if config.whiten_advantages:
            advantages = masked_whiten(advantages, response_mask)
    return SafeRLHFAdvantages(
        advantages=advantages,
        returns=returns,
        cost_returns=cost_returns,
        reward_advantages=reward_adv,
        cost_advantages=cost_adv,
    )


def compute_safe_rlhf_advantages(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    values: torch.Tensor | None = None,
    token_level_costs: torch.Tensor | None = None,
    cost_values: torch.Tensor | None = None,
    lagrange_multiplier: float | torch.Tensor | None = None,
    config: SafeRLHFAdvantageConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """Safe-RLHF: (A_r − λ·A_c)/(1 + λ) from reward and cost GAE, with both critics' returns.

    Needs ``values``, ``token_level_costs``, ``cost_values`` and ``lagrange_multiplier``.
    ``returns`` are the reward returns; ``extras`` holds ``cost_returns``,
    ``reward_advantages`` and ``cost_advantages``.
    """
    terms = compute_safe_rlhf_terms(
        token_level_rewards=token_level_rewards,
        token_level_costs=token_level_costs,
        values=values,
        cost_values=cost_values,
        response_mask=response_mask,
        lagrange_multiplier=lagrange_multiplier,
        config=config,
    )
    return AdvantageResult(
        advantages=terms.advantages,
        returns=terms.returns,
        extras={
            "cost_returns": terms.cost_returns,
            "reward_advantages": terms.reward_advantages,
            "cost_advantages": terms.cost_advantages,
        },
    )
