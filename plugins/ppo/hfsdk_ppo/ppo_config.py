"""Configuration of the PPO algorithm."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig


@attrs.frozen(kw_only=True)
class PPOConfig(AlgorithmConfig):
    """PPO: GAE advantages, clipped policy loss, clipped value loss, KL as a reward penalty."""

    advantage_estimator: str = "gae"
    policy_loss: str = "ppo_clip"
    value_loss: str = "clipped"
    kl_in_reward: bool = True
    kl_coef: float = attrs.field(default=0.05, validator=attrs.validators.ge(0.0))
