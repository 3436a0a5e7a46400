"""Prompt batches drawn at different times padded to one width, so their rollouts concatenate."""

from __future__ import annotations

import torch

from hfsdk import Batch


def left_pad(prompts: Batch, width: int) -> Batch:
    """``prompts`` with ``input_ids``/``attention_mask`` left-padded to ``width`` columns.

    The pad id is the one the batch already pads with (any id works under a zero
    mask; 0 when the batch has no padding at all).
    """
    ids, mask = prompts["input_ids"], prompts["attention_mask"]
    extra = width - ids.shape[1]
    if extra <= 0:
        return prompts
    padded = ids[mask == 0]
    pad_id = int(padded[0]) if len(padded) else 0
    out = prompts.index(slice(0, len(prompts)))
    out["input_ids"] = torch.cat([torch.full((len(ids), extra), pad_id, dtype=ids.dtype), ids], 1)
    out["attention_mask"] = torch.cat([torch.zeros((len(ids), extra), dtype=mask.dtype), mask], 1)
    return out
