"""The standard policy losses every algorithm may select: ``ppo_clip`` and ``reinforce``.

``ppo_clip``, with ratio ``ρ = exp(log π − log π_old)`` per token and advantage ``A``::

    ℓ = max(−A·ρ, −A·clip(ρ, 1 − ε_low, 1 + ε_high))
    if A < 0 and dual clipping is on: ℓ = min(ℓ, −A·c)        (Ye et al., 2020)

Every policy loss takes ``log_prob``, ``old_log_prob``, ``advantages``,
``response_mask`` (all (B, T)), its ``config`` and one
:class:`hfsdk.LossAggregation` (mode, global counts,
``norm_length``, dp size; see :class:`hfsdk.PolicyLoss`), and
returns ``(loss, metrics)`` with at least ``pg_clipfrac`` and ``ppo_kl``.
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

    clip_ratio_low: float = help_field(
        "ε_low: the ratio π/π_old is clipped below at 1 − ε_low (Schulman et al., 2017).",
        default=0.2,
        validator=[attrs.validators.ge(0.0), attrs.validators.lt(1.0)],
    )
    clip_ratio_high: float = help_field(
        "ε_high: the ratio is clipped above at 1 + ε_high (larger than ε_low is DAPO's clip-"
        "higher).",
        default=0.2,
        validator=attrs.validators.ge(0.0),
    )
    clip_ratio_c: float | None = help_field(
        "Dual-clip constant c > 1 bounding the loss of negative advantages (Ye et al., 2020); "
        "null turns it off.",
        default=3.0,
        validator=_greater_than_one,
    )


@attrs.frozen(kw_only=True)
class ReinforceConfig:
    """Settings of the plain policy gradient ``reinforce`` (it has none to tune)."""


def approx_kl(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, response_mask: torch.Tensor
) -> float:
    """``ppo_kl``: masked mean of ``old_log_prob − log_prob`` (k1 KL from the old policy)."""
    diff = masked_fill_zero(old_log_prob.detach() - log_prob.detach(), response_mask)
    return float(masked_mean(diff, response_mask).item())


def reinforce_loss(
    *,
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: ReinforceConfig | None = None,
    aggregation: LossAggregation | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Plain policy gradient: aggregate ``−A · log π(y_t)``, no ratio, no clipping.

    ``old_log_prob`` only feeds the ``ppo_kl`` metric; ``pg_clipfrac`` is always 0.
    """
    check_token_tensors(
        response_mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages
    )
    loss_mat = -masked_fill_zero(advantages, response_mask) * masked_fill_zero(
        log_prob, response_mask
    )
    loss = aggregate_loss(loss_mat, response_mask, aggregation)
    return loss, {"pg_clipfrac": 0.0, "ppo_kl": approx_kl(log_prob, old_log_prob, response_mask)}


def ppo_clip_loss(
    *,
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: PPOClipConfig | None = None,
    aggregation: LossAggregation | None = None,
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
    loss = aggregate_loss(loss_mat, response_mask, aggregation)
    metrics = {
        "pg_clipfrac": float(masked_mean(clip_active.float(), response_mask).item()),
        "pg_clipfrac_lower": float(masked_mean(dual_active.float(), response_mask).item()),
        "ppo_kl": float(masked_mean(-log_ratio.detach(), response_mask).item()),
    }
    return loss, metrics
