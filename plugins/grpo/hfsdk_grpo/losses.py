"""GSPO: PPO-style clipping on a sequence-level importance ratio (Zheng et al., 2025).

With ``|y_i|`` valid tokens in sequence ``i``::

    log s_i = (1/|y_i|) Σ_t (log π(y_t) − log π_old(y_t))
    s_{i,t} = sg[s_i] · π(y_t) / sg[π(y_t)]          (value s_i, per-token gradient)
    ℓ_{i,t} = max(−A·s_{i,t}, −A·clip(s_{i,t}, 1 − ε_low, 1 + ε_high))

Aggregated with ``seq-mean-token-mean`` this has exactly the gradient of the
sequence-level GSPO objective; the clip ranges are much smaller than PPO's.
"""

from __future__ import annotations

import attrs
import torch

from hfsdk import (
    LossAggregation,
    aggregate_loss,
    as_bool_mask,
    check_token_tensors,
    help_field,
    masked_fill_zero,
    masked_mean,
)

LOG_RATIO_CLAMP = 10.0
"""Bound on the sequence log ratio before ``exp`` (exp(10) ≈ 2e4 is far outside any clip)."""


GSPO_DEFAULT_AGGREGATION = LossAggregation(mode="seq-mean-token-mean")
"""Without an aggregation, the mode that gives GSPO's sequence-level gradient."""


@attrs.frozen(kw_only=True)
class GSPOConfig:
    """Settings of the ``gspo`` policy loss (defaults from the GSPO paper)."""

    clip_ratio_low: float = help_field(
        "ε_low on the sequence-level ratio (GSPO; Zheng et al., 2025).",
        default=3e-4,
        validator=[attrs.validators.ge(0.0), attrs.validators.lt(1.0)],
    )
    clip_ratio_high: float = help_field(
        "ε_high on the sequence-level ratio.",
        default=4e-4,
        validator=attrs.validators.ge(0.0),
    )


def gspo_loss(
    *,
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: GSPOConfig | None = None,
    aggregation: LossAggregation | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO loss; metrics ``pg_clipfrac`` (clipped tokens) and ``ppo_kl`` (token-level k1)."""
    config = config or GSPOConfig()
    check_token_tensors(
        response_mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages
    )
    mask = as_bool_mask(response_mask)
    logp = masked_fill_zero(log_prob, mask)
    log_ratio = masked_fill_zero(logp - old_log_prob, mask)
    lengths = mask.sum(dim=-1).clamp(min=1).to(log_ratio.dtype)
    seq_log_ratio = log_ratio.sum(dim=-1) / lengths
    token_log_ratio = seq_log_ratio.detach().unsqueeze(-1) + logp - logp.detach()
    ratio = torch.exp(masked_fill_zero(token_log_ratio, mask).clamp(max=LOG_RATIO_CLAMP))
    adv = masked_fill_zero(advantages, mask)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - config.clip_ratio_low, 1.0 + config.clip_ratio_high)
    loss_mat = torch.maximum(unclipped, clipped)
    loss = aggregate_loss(loss_mat, mask, aggregation or GSPO_DEFAULT_AGGREGATION)
    metrics = {
        "pg_clipfrac": float(masked_mean((clipped > unclipped).float(), mask).item()),
        "ppo_kl": float(masked_mean(-log_ratio.detach(), mask).item()),
    }
    return loss, metrics
