"""DAPO's overlong reward shaping: a soft penalty over the last part of the length budget."""

from __future__ import annotations

import torch


def overlong_penalty(
    response_lengths: torch.Tensor, max_length: int, buffer: int, factor: float
) -> torch.Tensor:
    """Per-sample penalty (≤ 0) for responses that run into the last ``buffer`` tokens.

    With ``L_max = max_length`` and ``L_cache = buffer``: 0 up to ``L_max − L_cache``,
    then falling linearly to ``−factor`` at ``L_max`` (and ``−factor`` beyond), as in
    the paper's soft overlong punishment. ``buffer = 0`` turns it off.
    """
    if buffer <= 0:
        return torch.zeros_like(response_lengths, dtype=torch.float32)
    expected = max_length - buffer
    over = (response_lengths.float() - expected).clamp(min=0.0)
    return -(over / buffer).clamp(max=1.0) * factor
