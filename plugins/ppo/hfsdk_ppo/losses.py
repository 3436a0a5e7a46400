"""PPO's clipped policy loss (``ppo_clip``) and clipped value loss (``clipped``).

Policy, with ratio ``ρ = exp(log π − log π_old)`` per token and advantage ``A``::

    ℓ = max(−A·ρ, −A·clip(ρ, 1 − ε_low, 1 + ε_high))
    if A < 0 and dual clipping is on: ℓ = min(ℓ, −A·c)        (Ye et al., 2020)

Value, with ``v`` the new and ``v_old`` the rollout-time values and ``R`` the returns::

    v_clip = v_old + clip(v − v_old, −ε_v, ε_v)
    ℓ_v = ½ · max((v − R)², (v_clip − R)²)

Both are aggregated with :func:`hfsdk.core.maths.aggregation.aggregate_loss`.
"""

from __future__ import annotations

import attrs
import torch

from hfsdk.core.maths.aggregation import Count, aggregate_loss
from hfsdk.core.maths.masked import check_token_tensors, masked_fill_zero, masked_mean

LOG_RATIO_CLAMP = 20.0
"""Bound on |log ρ| before ``exp``: keeps one stale token from overflowing (no gradient beyond)."""


def _greater_than_one(_instance: object, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not value > 1.0:
        raise ValueError(
            f"{attribute.name}={value!r}; the dual-clip constant must be > 1 (typically 3), "
            "or null to turn dual clipping off"
        )


@attrs.frozen(kw_only=True)
class PPOClipConfig:
    """Settings of the ``ppo_clip`` policy loss."""

    clip_ratio_low: float = attrs.field(
        default=0.2, validator=[attrs.validators.ge(0.0), attrs.validators.lt(1.0)]
    )
    clip_ratio_high: float = attrs.field(default=0.2, validator=attrs.validators.ge(0.0))
    clip_ratio_c: float | None = attrs.field(default=3.0, validator=_greater_than_one)


@attrs.frozen(kw_only=True)
class ClippedValueLossConfig:
    """Settings of the ``clipped`` value loss; ``clip_range_value: null`` turns clipping off."""

    clip_range_value: float | None = attrs.field(
        default=0.2, validator=attrs.validators.optional(attrs.validators.gt(0.0))
    )


def ppo_clip_loss(
    *,
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: PPOClipConfig | None = None,
    global_token_count: Count | None = None,
    global_seq_count: Count | None = None,
    norm_length: float | None = None,
    dp_size: int = 1,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped surrogate loss with asymmetric clip ratios and optional dual clipping.

    Metrics: ``pg_clipfrac`` (tokens where the ratio clip is active),
    ``pg_clipfrac_lower`` (tokens where the dual clip is active) and ``ppo_kl``
    (mean of ``log π_old − log π``).
    """
    config = config or PPOClipConfig()
    check_token_tensors(
        response_mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages
    )
    # Zero masked inputs before exp so padding garbage cannot become inf/NaN (even in grads).
    log_ratio = masked_fill_zero(log_prob - old_log_prob, response_mask)
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    adv = masked_fill_zero(advantages, response_mask)
    ratio = torch.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - config.clip_ratio_low, 1.0 + config.clip_ratio_high)
    loss_mat = torch.maximum(unclipped, clipped)
    clip_active = clipped > unclipped
    if config.clip_ratio_c is not None:
        bound = -adv * config.clip_ratio_c
        dual_active = (adv < 0) & (loss_mat > bound)
        loss_mat = torch.where(dual_active, bound, loss_mat)
    else:
        dual_active = torch.zeros_like(clip_active)
    loss = aggregate_loss(
        loss_mat,
        response_mask,
        loss_agg_mode,
        global_token_count=global_token_count,
        global_seq_count=global_seq_count,
        norm_length=norm_length,
        dp_size=dp_size,
    )
    metrics = {
        "pg_clipfrac": float(masked_mean(clip_active.float(), response_mask).item()),
        "pg_clipfrac_lower": float(masked_mean(dual_active.float(), response_mask).item()),
        "ppo_kl": float(masked_mean(-log_ratio.detach(), response_mask).item()),
    }
    return loss, metrics


def clipped_value_loss(
    *,
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: ClippedValueLossConfig | None = None,
    global_token_count: Count | None = None,
    global_seq_count: Count | None = None,
    norm_length: float | None = None,
    dp_size: int = 1,
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
    loss = 0.5 * aggregate_loss(
        loss_mat,
        response_mask,
        loss_agg_mode,
        global_token_count=global_token_count,
        global_seq_count=global_seq_count,
        norm_length=norm_length,
        dp_size=dp_size,
    )
    return loss, {"vf_clipfrac": float(masked_mean(clip_active.float(), response_mask).item())}
