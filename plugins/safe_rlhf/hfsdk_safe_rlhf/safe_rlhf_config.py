"""Configuration of the Safe-RLHF (PPO-Lagrangian) algorithm."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig, help_field


@attrs.frozen(kw_only=True)
class SafeRLHFConfig(AlgorithmConfig):
    """Safe-RLHF: PPO on (A_r − λ·A_c)/(1 + λ) with a learned Lagrange multiplier λ.

    The cost must stay below ``cost_threshold`` on average; λ rises while it does not.
    """

    advantage_estimator: str = "safe_rlhf"
    policy_loss: str = "ppo_clip"
    value_loss: str = help_field(
        "Registered value loss for both critics (hfsdk list value-losses).",
        default="clipped",
    )
    kl_in_reward: bool = True
    kl_coef: float = attrs.field(default=0.02, validator=attrs.validators.ge(0.0))
    cost_threshold: float = help_field(
        "Cost budget d: λ rises while the mean episode cost exceeds it (Dai et al., 2023, Safe"
        " RLHF).",
        default=0.0,
    )
    lambda_init: float = help_field(
        "Initial Lagrange multiplier λ (> 0).",
        default=1.0,
        validator=attrs.validators.gt(0.0),
    )
    lambda_lr: float = help_field(
        "Step size of log λ: log λ += lambda_lr·(J_c − cost_threshold)·λ each step.",
        default=0.1,
        validator=attrs.validators.gt(0.0),
    )
    lambda_max: float | None = help_field(
        "Upper bound on λ (at least lambda_init); null for none.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.gt(0.0)),
    )
    lambda_update_delay: int = help_field(
        "Steps before λ starts to update (lets the critics warm up).",
        default=0,
        validator=attrs.validators.ge(0),
    )
    episode_cost_window: int = help_field(
        "Number of most recent episode costs whose mean J_c drives the λ update.",
        default=16,
        validator=attrs.validators.ge(1),
    )

    def __attrs_post_init__(self) -> None:
        # Checked here too, so the config is refused before any model is built.
        if self.lambda_max is not None and self.lambda_init > self.lambda_max:
            raise ValueError(
                f"lambda_init={self.lambda_init} is above lambda_max={self.lambda_max}; lower "
                "algorithm.lambda_init or raise algorithm.lambda_max"
            )
