"""Policy losses that belong to no single algorithm: ``reinforce``.

Every policy loss takes ``log_prob``, ``old_log_prob``, ``advantages``,
``response_mask`` (all (B, T)), ``loss_agg_mode``, its ``config`` and the
global counts of :func:`~hfsdk.core.maths.aggregation.aggregate_loss`, and
returns ``(loss, metrics)`` with at least ``pg_clipfrac`` and ``ppo_kl``.
"""

from __future__ import annotations

import attrs
import torch

from hfsdk.core.maths.aggregation import Count, aggregate_loss
from hfsdk.core.maths.masked import check_token_tensors, masked_fill_zero, masked_mean


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
    loss_agg_mode: str = "token-mean",
    config: ReinforceConfig | None = None,
    global_token_count: Count | None = None,
    global_seq_count: Count | None = None,
    norm_length: float | None = None,
    dp_size: int = 1,
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
    loss = aggregate_loss(
        loss_mat,
        response_mask,
        loss_agg_mode,
        global_token_count=global_token_count,
        global_seq_count=global_seq_count,
        norm_length=norm_length,
        dp_size=dp_size,
    )
    return loss, {"pg_clipfrac": 0.0, "ppo_kl": approx_kl(log_prob, old_log_prob, response_mask)}
