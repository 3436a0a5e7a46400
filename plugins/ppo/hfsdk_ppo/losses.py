"""PPO's clipped value loss (``clipped``); reused by Safe-RLHF for both critics.

(The ``ppo_clip`` policy loss is shared by every algorithm, so it lives in
:mod:`hfsdk_policy_losses.losses`.)

Value, with ``v`` the new and ``v_old`` the rollout-time values and ``R`` the returns::

    v_clip = v_old + clip(v − v_old, −ε_v, ε_v)
    ℓ_v = ½ · max((v − R)², (v_clip − R)²)

It is aggregated with :func:`hfsdk.core.maths.aggregation.aggregate_loss`.
"""

from __future__ import annotations

import attrs
import torch

from hfsdk import (
    LossAggregation,
    aggregate_loss,
    check_token_tensors,
    help_field,
    masked_fill_zero,
    masked_mean,
)


@attrs.frozen(kw_only=True)
class ClippedValueLossConfig:
    """Settings of the ``clipped`` value loss; ``clip_range_value: null`` turns clipping off."""

    clip_range_value: float | None = help_field(
        "ε_v: new values may move at most this far from the rollout's values; null turns "
        "clipping off.",
        default=0.2,
        validator=attrs.validators.optional(attrs.validators.gt(0.0)),
    )


def clipped_value_loss(
    *,
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    response_mask: torch.Tensor,
    config: ClippedValueLossConfig | None = None,
    aggregation: LossAggregation | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped value loss ``½·max((v − R)², (v_clip − R)²)``; metric ``vf_clipfrac``."""
    config = config or ClippedValueLossConfig()
    check_token_tensors(response_mask, values=values, old_values=old_values, returns=returns)
    v = masked_fill_zero(values, response_mask)
    v_old = masked_fill_zero(old_values, response_mask)
    target = masked_fill_zero(returns, response_mask)
    unclipped = (v - target).square()
    if config.clip_range_value is None:
        loss_mat = unclipped
        clip_active = torch.zeros_like(unclipped, dtype=torch.bool)
    else:
        eps = config.clip_range_value
        v_clipped = v_old + (v - v_old).clamp(-eps, eps)
        clipped = (v_clipped - target).square()
        loss_mat = torch.maximum(unclipped, clipped)
        clip_active = clipped > unclipped
    loss = 0.5 * aggregate_loss(loss_mat, response_mask, aggregation)
    return loss, {"vf_clipfrac": float(masked_mean(clip_active.float(), response_mask).item())}
