"""Token entropy of the policy and the entropy bonus."""

from __future__ import annotations

import torch

from hfsdk.core.maths.aggregation import LossAggregation, aggregate_loss


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
