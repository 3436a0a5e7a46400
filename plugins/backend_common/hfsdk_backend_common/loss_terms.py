"""The actor objective's extra loss terms: the entropy bonus and KL to the reference.

Shared by the training backends (their actors compute token entropy from logits
and add these terms in :mod:`hfsdk_backend_common.objectives`).
"""

from __future__ import annotations

import torch

from hfsdk import KLEstimator, LossAggregation, aggregate_loss, token_kl


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax distribution over the last dimension.

    ``H = logsumexp(z) − Σ softmax(z)·z``, which avoids ``log(0)`` for tokens
    with vanishing probability. Shape: ``logits.shape[:-1]``.
    """
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def entropy_bonus(
    entropy: torch.Tensor,
    response_mask: torch.Tensor,
    aggregation: LossAggregation | None = None,
    entropy_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The entropy bonus as a loss term: ``−entropy_coef · aggregate(entropy)``.

    Adding it to the policy loss rewards exploration. Returns
    ``(loss, {"entropy": aggregated entropy})``.
    """
    mean_entropy = aggregate_loss(entropy, response_mask, aggregation)
    return -entropy_coef * mean_entropy, {"entropy": float(mean_entropy.detach().item())}


def kl_loss(
    log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    aggregation: LossAggregation | None = None,
    estimator: str | KLEstimator = "k3_clamped",
) -> tuple[torch.Tensor, dict[str, float]]:
    """KL as a loss term: the aggregated per-token KL (multiply by ``kl_loss_coef``).

    Returns ``(loss, {"kl_loss": value})``; gradients flow into ``log_prob``.
    """
    kl = token_kl(log_prob, ref_log_prob, response_mask, estimator)
    loss = aggregate_loss(kl, response_mask, aggregation)
    return loss, {"kl_loss": float(loss.detach().item())}
