"""Per-token quantities of the response part of ``prompt + response`` sequences.

Layout (the batch contract): ``input_ids`` is ``(B, P + R)`` with the prompt
left-padded to ``P`` and the response right-padded to ``R``. The model's
output at position ``P − 1 + t`` predicts (or values the state before)
response token ``t``, so every per-token tensor here is ``(B, R)``.
"""

from __future__ import annotations

import torch

from hfsdk import HfsdkError
from hfsdk_backend_common.loss_terms import entropy_from_logits


def response_slice(logits_or_values: torch.Tensor, response_length: int) -> torch.Tensor:
    """The outputs that belong to the ``response_length`` response tokens (see module docstring)."""
    total = logits_or_values.shape[1]
    if response_length <= 0 or response_length >= total:
        raise HfsdkError(
            f"response length {response_length} does not fit sequences of length {total}; the "
            "batch needs 'responses' (B, R) with 0 < R < the width of 'input_ids'"
        )
    return logits_or_values[:, total - response_length - 1 : total - 1]


def response_log_probs(
    logits: torch.Tensor,
    responses: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of the response tokens, and the entropy of each position's distribution.

    ``logits`` is the model output over the whole sequence ``(B, P + R, V)``;
    ``temperature`` divides the logits first, as the sampler did (1 when it
    decoded greedily).
    """
    response_logits = response_slice(logits, responses.shape[1]).float()
    if temperature != 1.0:
        response_logits = response_logits / temperature
    log_z = torch.logsumexp(response_logits, dim=-1)
    chosen = response_logits.gather(-1, responses.long().unsqueeze(-1)).squeeze(-1)
    log_probs = chosen - log_z
    entropy = entropy_from_logits(response_logits) if with_entropy else None
    return log_probs, entropy


def padding_columns(attention_mask: torch.Tensor, response_mask: torch.Tensor) -> tuple[int, int]:
    """``(first, kept)``: the columns a forward pass of these rows needs.

    ``first`` leading columns are padding in every row (left-padded prompts);
    only the first ``kept`` response columns hold a valid token in some row.
    Dropping both leaves every valid position's output unchanged: left columns
    are masked out for every query, and right columns come after every valid
    token (attention is causal). ``kept`` is at least 1, so shapes stay valid.
    """
    width = response_mask.shape[1]
    prompt = attention_mask.shape[1] - width
    attended = attention_mask[:, :prompt].bool().any(dim=0)
    first = int(attended.int().argmax()) if bool(attended.any()) else max(prompt - 1, 0)
    valid = response_mask.bool().any(dim=0).nonzero()
    kept = int(valid.max()) + 1 if valid.numel() else 1
    return first, kept


def last_token_index(response_mask: torch.Tensor, prompt_length: int) -> torch.Tensor:
    """Index in the full sequence of each sample's last response token (the mask's last 1).

    A multi-turn loss mask has holes where tools spoke; the last 1 is the model's
    last token either way (a row without any gets the prompt's last position).
    """
    positions = torch.arange(response_mask.shape[-1], device=response_mask.device)
    marked = torch.where(response_mask.bool(), positions, torch.full_like(positions, -1))
    return prompt_length + marked.max(dim=-1).values


def top_k_log_probs(
    scaled_logits: torch.Tensor, log_z: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest log-probs per position and their token ids, each ``(..., k)``.

    ``scaled_logits`` are ``(..., V)`` (temperature already applied), ``log_z``
    their ``logsumexp`` over the vocabulary ``(...)``; ids are ``int64``, highest first.
    """
    if not 0 < k <= scaled_logits.shape[-1]:
        raise HfsdkError(
            f"top-k of {k} tokens does not fit a vocabulary of {scaled_logits.shape[-1]}; "
            "use 1 <= k <= the vocabulary size"
        )
    values, ids = torch.topk(scaled_logits, k, dim=-1)
    return values - log_z.unsqueeze(-1), ids


def gathered_log_probs(
    scaled_logits: torch.Tensor, log_z: torch.Tensor, ids: torch.Tensor
) -> torch.Tensor:
    """Log-probs ``(..., k)`` of the token ``ids`` ``(..., k)`` per position (differentiable)."""
    return scaled_logits.gather(-1, ids.long()) - log_z.unsqueeze(-1)
