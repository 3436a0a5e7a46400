"""Configuration of the PPO algorithm."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig, help_field


@attrs.frozen(kw_only=True)
class PPOConfig(AlgorithmConfig):
    """PPO: GAE advantages, clipped policy loss, clipped value loss, KL as a reward penalty."""

    advantage_estimator: str = "gae"
    policy_loss: str = "ppo_clip"
    value_loss: str = help_field(
        "Registered value loss for the critic (hfsdk list value-losses); its settings are the "
        "'value_loss' section.",
        default="clipped",
    )
    kl_in_reward: bool = True
    kl_coef: float = attrs.field(default=0.05, validator=attrs.validators.ge(0.0))
