"""Configuration of the Safe-RLHF (PPO-Lagrangian) algorithm."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig


@attrs.frozen(kw_only=True)
class SafeRLHFConfig(AlgorithmConfig):
    """Safe-RLHF: PPO on (A_r − λ·A_c)/(1 + λ) with a learned Lagrange multiplier λ.

    The cost must stay below ``cost_threshold`` on average; λ rises while it does not.
    """

    advantage_estimator: str = "safe_rlhf"
    policy_loss: str = "ppo_clip"
    value_loss: str = "clipped"
    kl_in_reward: bool = True
    kl_coef: float = attrs.field(default=0.02, validator=attrs.validators.ge(0.0))
    cost_threshold: float = 0.0
    lambda_init: float = attrs.field(default=1.0, validator=attrs.validators.gt(0.0))
    lambda_lr: float = attrs.field(default=0.1, validator=attrs.validators.gt(0.0))
    lambda_max: float | None = None
    lambda_update_delay: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    episode_cost_window: int = attrs.field(default=16, validator=attrs.validators.ge(1))
