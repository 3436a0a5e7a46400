"""Configuration of the ReMax algorithm."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig


@attrs.frozen(kw_only=True)
class ReMaxConfig(AlgorithmConfig):
    """ReMax: REINFORCE with the greedy response's reward as baseline, no critic."""

    advantage_estimator: str = "remax"
    policy_loss: str = "ppo_clip"
    kl_in_reward: bool = True
    kl_coef: float = attrs.field(default=0.01, validator=attrs.validators.ge(0.0))
