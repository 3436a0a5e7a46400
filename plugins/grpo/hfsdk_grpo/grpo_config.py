"""Configuration of the GRPO algorithm."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig


@attrs.frozen(kw_only=True)
class GRPOConfig(AlgorithmConfig):
    """GRPO: several samples per prompt, group-relative advantages, KL as a loss term.

    Select ``advantage_estimator: rloo`` or ``reinforce_plus_plus_baseline`` for
    those variants, or ``norm_by_std: false`` in the estimator section for Dr.GRPO.
    """

    advantage_estimator: str = "grpo"
    policy_loss: str = "ppo_clip"
    kl_estimator: str = "k3"
    kl_in_reward: bool = False
    kl_loss_coef: float = attrs.field(default=0.01, validator=attrs.validators.ge(0.0))
    n_samples_per_prompt: int = attrs.field(default=4, validator=attrs.validators.ge(1))
