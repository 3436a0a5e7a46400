"""``nll``: the negative log-likelihood of given tokens, as a registered policy loss.

It takes the policy-loss arguments (see ``hfsdk.PolicyLoss``) so every training
backend's ``update_actor`` runs it unchanged — packing, LoRA, gradient
checkpointing, micro-batches and data parallelism included. ``advantages`` and
``old_log_prob`` are not used: the response mask alone says which tokens are
trained (assistant tokens of a supervised batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hfsdk import aggregate_loss, check_token_tensors, masked_fill_zero, masked_mean

if TYPE_CHECKING:
    import torch

    from hfsdk import LossAggregation


@attrs.frozen(kw_only=True)
class NLLConfig:
    """Settings of ``nll`` (none to tune; ``algorithm.loss_agg_mode`` sets the reduction)."""


def nll_loss(
    *,
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: NLLConfig | None = None,
    aggregation: LossAggregation | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Aggregate ``−log π(y_t)`` over the masked tokens; metric ``nll`` (per-token mean)."""
    del old_log_prob, advantages, config
    check_token_tensors(response_mask, log_prob=log_prob)
    loss_mat = -masked_fill_zero(log_prob, response_mask)
    loss = aggregate_loss(loss_mat, response_mask, aggregation)
    return loss, {"nll": float(masked_mean(loss_mat.detach(), response_mask))}
