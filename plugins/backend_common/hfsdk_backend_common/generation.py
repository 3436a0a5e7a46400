"""What every rollout does the same way: where responses end, and their masks."""

from __future__ import annotations

from typing import Any

import torch

from hfsdk import HfsdkError


def response_mask_from_eos(responses: torch.Tensor, eos_ids: list[int]) -> torch.Tensor:
    """1 on every token up to and including the first EOS (all of them without one), else 0."""
    is_eos = torch.isin(responses, torch.tensor(eos_ids, device=responses.device))
    eos_before = (is_eos.long().cumsum(dim=-1) - is_eos.long()) > 0
    return (~eos_before).float()


def eos_token_ids(configured: int | list[int] | None, tokenizer: Any) -> list[int]:
    """The ids that end a response: the generation config's ``eos_token_id`` and the tokenizer's."""
    ids: set[int] = set()
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    if not ids:
        raise HfsdkError(
            "neither the model's generation config nor the tokenizer names an EOS token; "
            "responses could never end — set eos_token_id in generation_config.json"
        )
    return sorted(ids)
