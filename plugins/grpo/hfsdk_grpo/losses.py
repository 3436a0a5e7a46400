"""GSPO: PPO-style clipping on a sequence-level importance ratio (Zheng et al., 2025).

With ``|y_i|`` valid tokens in sequence ``i``::

    log s_i = (1/|y_i|) Σ_t (log π(y_t) − log π_old(y_t))
    s_{i,t} = sg[s_i] · π(y_t) / sg[π(y_t)]          (value s_i, per-token gradient)
    ℓ_{i,t} = max(−A·s_{i,t}, −A·clip(s_{i,t}, 1 − ε_low, 1 + ε_high))

Aggregated with ``seq-mean-token-mean`` this has exactly the gradient of the
sequence-level GSPO objective; the clip ranges are much smaller than PPO's. Any other
``algorithm.loss_agg_mode`` (GRPO's default is ``token-mean``) weights each sequence by its
length: a variant, allowed (verl allows it too) but warned about before the run starts
(:func:`gspo_aggregation_warning`).
"""

from __future__ import annotations

from typing import Any

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


GSPO_MODE = "seq-mean-token-mean"
"""The aggregation mode that gives GSPO's sequence-level gradient (the paper's objective)."""

GSPO_DEFAULT_AGGREGATION = LossAggregation(mode=GSPO_MODE)
"""Without an aggregation, the mode that gives GSPO's sequence-level gradient."""

GSPO_WARNING_NAME = "gspo_aggregation"
"""The preflight registry name of :func:`gspo_aggregation_warning`."""


def gspo_aggregation_warning(config: Any, spec: Any = None, prepared: Any = None) -> str | None:
    """One line when ``gspo`` is combined with a mode other than ``seq-mean-token-mean``.

    A run always passes ``algorithm.loss_agg_mode`` (``token-mean`` by default), so the
    loss's own fallback to the paper's mode never applies there and the run would silently
    train a length-weighted variant. A warning, not a refusal: verl allows any mode with
    GSPO (and recommends this one). A preflight check, so it is logged once per run.
    """
    del spec, prepared  # the check reads the config alone
    algo = getattr(config, "algorithm", None)
    mode = getattr(algo, "loss_agg_mode", None)
    if getattr(algo, "policy_loss", None) != "gspo" or mode in (None, GSPO_MODE):
        return None
    return (
        f"algorithm.policy_loss=gspo (plugin 'grpo') with algorithm.loss_agg_mode={mode} "
        "weights each sequence by its length, which is not the GSPO paper's sequence-level "
        f"objective; set algorithm.loss_agg_mode={GSPO_MODE} (as verl recommends), or keep "
        f"{mode} if this variant is meant"
    )


@attrs.frozen(kw_only=True)
class GSPOConfig:
    """Settings of the ``gspo`` policy loss (defaults from the GSPO paper).

    The paper's objective also needs ``algorithm.loss_agg_mode: seq-mean-token-mean``.
    """

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
    """GSPO loss; the paper's objective needs ``algorithm.loss_agg_mode=seq-mean-token-mean``.

    Metrics ``pg_clipfrac`` (clipped tokens) and ``ppo_kl`` (token-level k1). Another mode
    trains a length-weighted variant (module docstring).
    """
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
