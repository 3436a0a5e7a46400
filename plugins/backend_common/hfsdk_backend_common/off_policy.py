"""Off-policy correction: importance weights between the rollout's policy and the trained one.

A rollout engine that samples with other weights than the ones being trained
(a one-step-off or asynchronous pipeline, or a vLLM engine whose numerics
differ from the training backend's) produced its tokens with a behaviour
policy ``μ`` (its ``rollout_log_probs``: temperature-scaled, nothing else),
while the policy loss's ratio is taken against ``π_old`` (the ``old_log_probs``
of the training engine). The per-token importance ratio is::

    ρ_t = π_old(y_t) / μ(y_t) = exp(old_log_prob_t − rollout_log_prob_t)

and its sequence-level version ``ρ_i = Π_t ρ_t`` (the sum of the log ratios over
the valid tokens of sequence ``i``, broadcast to its tokens). Two corrections:

- ``tis`` (truncated IS; Ionides, 2008; Yao et al., 2025): the weight is
  ``min(ρ, cap)``; the share of valid tokens where ``ρ > cap`` is reported as
  ``is_truncated_share``.
- ``mis`` (masked IS; Liu et al., 2025): the weight is ``ρ`` where ``ρ ≤ cap``
  and 0 elsewhere (the token, or the whole sequence at sequence level, drops out
  of the loss); ``is_masked_share`` reports the share of valid tokens masked.

The weight is detached and multiplies the policy loss per token. Every policy
loss here is of the form ``max(−A·x, −A·y)`` (with a dual clip ``min(·, −A·c)``),
so multiplying the advantages by a weight ``w ≥ 0`` multiplies each token's loss
by ``w`` exactly: :func:`weighted_advantages` does that, which lets any
registered policy loss take the correction without a change to its signature.
Masked tokens keep counting in the aggregation's denominator (the loss scale
does not grow as more tokens are masked).
"""

from __future__ import annotations

from typing import Literal

import attrs
import torch

from hfsdk import as_bool_mask, check_token_tensors, masked_fill_zero, masked_mean

ISCorrection = Literal["none", "tis", "mis"]
ISLevel = Literal["token", "sequence"]
IS_CORRECTIONS: tuple[str, ...] = ("none", "tis", "mis")
IS_LEVELS: tuple[str, ...] = ("token", "sequence")
LOG_RATIO_CLAMP = 20.0
"""Bound on log ρ before ``exp`` (a sequence-level sum of many tokens could overflow)."""


def _positive(_instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name}={value!r}; the IS cap must be > 0 (typically 2)")


@attrs.frozen(kw_only=True)
class OffPolicyCorrection:
    """Which correction the actor's loss applies (``correction: none`` applies nothing)."""

    correction: ISCorrection = attrs.field(
        default="none", validator=attrs.validators.in_(IS_CORRECTIONS)
    )
    level: ISLevel = attrs.field(default="token", validator=attrs.validators.in_(IS_LEVELS))
    cap: float = attrs.field(default=2.0, validator=_positive)

    @property
    def active(self) -> bool:
        """Whether a correction is applied at all."""
        return self.correction != "none"


def importance_weights(
    *,
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    correction: OffPolicyCorrection,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Detached per-token weights (B, T), 0 where masked, and their metrics.

    Metrics (over valid tokens): ``is_weight_mean``, ``is_weight_max`` (of the
    applied weights), ``is_ratio_max`` (of ρ before truncation or masking) and
    ``is_truncated_share`` (``tis``) or ``is_masked_share`` (``mis``).
    """
    check_token_tensors(
        response_mask, old_log_prob=old_log_prob, rollout_log_prob=rollout_log_prob
    )
    mask = as_bool_mask(response_mask)
    with torch.no_grad():
        log_ratio = masked_fill_zero(
            old_log_prob.detach().float() - rollout_log_prob.detach().float(), mask
        )
        if correction.level == "sequence":
            log_ratio = log_ratio.sum(dim=-1, keepdim=True).expand_as(log_ratio)
        ratio = torch.exp(log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
        over = (ratio > correction.cap) & mask
        if correction.correction == "tis":
            weights = ratio.clamp(max=correction.cap)
            share_name = "is_truncated_share"
        elif correction.correction == "mis":
            weights = torch.where(over, torch.zeros_like(ratio), ratio)
            share_name = "is_masked_share"
        else:
            weights = torch.ones_like(ratio)
            share_name = "is_truncated_share"
        weights = masked_fill_zero(weights, mask)
        valid = int(mask.sum())
        metrics = {
            "is_weight_mean": float(masked_mean(weights, mask)) if valid else 0.0,
            "is_weight_max": float(weights[mask].max()) if valid else 0.0,
            "is_ratio_max": float(ratio[mask].max()) if valid else 0.0,
            share_name: float(masked_mean(over.float(), mask)) if valid else 0.0,
        }
    return weights, metrics


def weighted_advantages(advantages: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Advantages scaled by the (non-negative, detached) IS weights: weights each token's loss."""
    return advantages * weights.to(advantages.dtype)
