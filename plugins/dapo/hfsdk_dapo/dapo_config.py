"""Configuration of the DAPO algorithm and its clip-higher policy loss."""

from __future__ import annotations

from typing import Any

import attrs

from hfsdk import LOSS_AGG_MODES, AlgorithmConfig, LossAggMode, help_field


def _dual_clip_above_one(
    _instance: object, attribute: attrs.Attribute, value: float | None
) -> None:
    # c <= 1 would bound every negative-advantage token's loss at or below its unclipped
    # value at ratio 1, i.e. zero their gradient; PPO's config refuses it the same way.
    if value is not None and not value > 1.0:
        raise ValueError(
            f"{attribute.name}={value!r}; the dual-clip constant must be > 1 (typically 3), "
            "or null to turn dual clipping off"
        )


@attrs.frozen(kw_only=True)
class DAPOConfig(AlgorithmConfig):
    """DAPO: GRPO's group advantages without KL, token-mean loss, clip-higher (``dapo_clip``),
    overlong reward shaping and dynamic sampling.

    The paper's values (Yu et al., 2025) for 20k-token responses: ε_low 0.2,
    ε_high 0.28, ``overlong_buffer_len`` 4096 with factor 1.0, 16 samples per
    prompt, and filter groups on the accuracy with up to 10 generation rounds.
    """

    advantage_estimator: str = "grpo"
    policy_loss: str = "dapo_clip"
    loss_agg_mode: LossAggMode = attrs.field(
        default="token-mean", validator=attrs.validators.in_(LOSS_AGG_MODES)
    )
    kl_in_reward: bool = False
    kl_loss_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    n_samples_per_prompt: int = attrs.field(default=4, validator=attrs.validators.ge(2))
    dynamic_sampling: bool = help_field(
        "Drop prompt groups whose samples all score the same and draw more prompts until "
        "the batch is full again.",
        default=True,
    )
    max_generation_rounds: int = help_field(
        "Dynamic sampling: generation rounds per step at most (the first included); a step "
        "that is still short trains on the groups it has.",
        default=4,
        validator=attrs.validators.ge(1),
    )
    overlong_buffer_len: int = help_field(
        "Overlong shaping: the last N tokens of rollout.max_response_length in which a "
        "response's reward falls linearly by up to overlong_penalty_factor; 0: off.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    overlong_penalty_factor: float = help_field(
        "Overlong shaping: the penalty at the length limit.",
        default=1.0,
        validator=attrs.validators.ge(0.0),
    )

    def __attrs_post_init__(self) -> None:
        if self.kl_in_reward or self.kl_loss_coef > 0:
            raise ValueError(
                "dapo trains without a reference model, so kl_in_reward must be false and "
                "kl_loss_coef 0; use grpo for a KL-regularised run"
            )
        # A setting that would do nothing is refused: the run would silently train without
        # the shaping or the refill rounds it asked for.
        defaults = attrs.fields(DAPOConfig)
        factor = defaults.overlong_penalty_factor.default
        if not self.overlong_buffer_len and self.overlong_penalty_factor != factor:
            raise ValueError(
                f"overlong_penalty_factor={self.overlong_penalty_factor!r} does nothing while "
                "overlong_buffer_len=0 (overlong shaping is off); set overlong_buffer_len > 0 "
                f"to shape, or remove overlong_penalty_factor (default {factor!r})"
            )
        rounds = defaults.max_generation_rounds.default
        if not self.dynamic_sampling and self.max_generation_rounds != rounds:
            raise ValueError(
                f"max_generation_rounds={self.max_generation_rounds!r} does nothing while "
                "dynamic_sampling=false (every step is one generation round); set "
                f"dynamic_sampling=true, or remove max_generation_rounds (default {rounds!r})"
            )


@attrs.frozen(kw_only=True)
class DAPOClipConfig:
    """``dapo_clip``: the clipped policy loss with DAPO's decoupled bounds (clip-higher)."""

    clip_ratio_low: float = help_field(
        "ε_low: the ratio π/π_old is clipped below at 1 − ε_low (0 < ε_low < 1).",
        default=0.2,
        validator=[attrs.validators.gt(0.0), attrs.validators.lt(1.0)],
    )
    clip_ratio_high: float = help_field(
        "ε_high: the ratio is clipped above at 1 + ε_high; above ε_low, low-probability "
        "tokens can still rise (DAPO's clip-higher).",
        default=0.28,
        validator=attrs.validators.gt(0.0),
    )
    clip_ratio_c: float | None = help_field(
        "Dual-clip constant c > 1 for negative advantages; null: off.",
        default=None,
        validator=_dual_clip_above_one,
    )


def overlong_problems(config: Any) -> list[str] | None:
    """A DAPO run's overlong buffer that is not shorter than its responses' budget (every
    response would be penalised), as ``hfsdk_validate_config`` messages."""
    algo = config.algorithm
    if not isinstance(algo, DAPOConfig) or not algo.overlong_buffer_len:
        return None
    budget = config.rollout.response_width()
    if algo.overlong_buffer_len < budget:
        return None
    return [
        f"algorithm.overlong_buffer_len={algo.overlong_buffer_len} is not shorter than the "
        f"responses' budget ({budget} tokens), so every response would be penalised; set it "
        "below that (DAPO's paper: 4096 of 20480), or 0 to turn overlong shaping off"
    ]
