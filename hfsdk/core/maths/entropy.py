"""Token entropy of the policy and the entropy bonus."""

from __future__ import annotations

import torch

from hfsdk.core.maths.aggregation import Count, aggregate_loss


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
    loss_agg_mode: str = "token-mean",
    entropy_coef: float = 0.0,
    *,
    global_token_count: Count | None = None,
    global_seq_count: Count | None = None,
    norm_length: float | None = None,
    dp_size: int = 1,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The entropy bonus as a loss term: ``−entropy_coef · aggregate(entropy)``.

    Adding it to the policy loss rewards exploration. Returns
    ``(loss, {"entropy": aggregated entropy})``.
    """
    mean_entropy = aggregate_loss(
        entropy,
        response_mask,
        loss_agg_mode,
        global_token_count=global_token_count,
        global_seq_count=global_seq_count,
        norm_length=norm_length,
        dp_size=dp_size,
    )
    return -entropy_coef * mean_entropy, {"entropy": float(mean_entropy.detach().item())}
