"""Rollouts of prompt batches drawn at different times, padded to one prompt width.

Dynamic sampling concatenates the rollouts of several rounds whose prompts
had different widths. The prompts are generated as drawn (so a batch the
async pipeline generated ahead is recognised as its own) and the *rollout* is
left-padded afterwards: left padding is attention 0 and position 0 (the
contract's layout), so every later pass sees the same tokens at the same
positions as if the prompts had been padded before generation.
"""

from __future__ import annotations

import torch

from hfsdk import Batch

PROMPT_WIDE = ("input_ids", "attention_mask", "position_ids")
"""Tensors that hold the prompt part (left) and the response part (right)."""


def _pad_id(ids: torch.Tensor, mask: torch.Tensor) -> int:
    """The id the batch already pads with (any works under a zero mask; 0 without padding)."""
    padded = ids[mask == 0]
    return int(padded[0]) if len(padded) else 0


def left_pad_rollout(batch: Batch, prompt_width: int) -> Batch:
    """A generated batch whose prompt part is left-padded to ``prompt_width`` columns."""
    ids, mask = batch["input_ids"], batch["attention_mask"]
    extra = prompt_width - (ids.shape[1] - batch["responses"].shape[1])
    if extra <= 0:
        return batch
    pad_id = _pad_id(ids, mask)
    out = batch.index(slice(0, len(batch)))
    rows = len(batch)
    for key in (*PROMPT_WIDE, "prompts"):
        if key not in out.tensor_keys:
            continue
        value = out[key]
        fill = pad_id if key in ("input_ids", "prompts") else 0
        pad = torch.full((rows, extra, *value.shape[2:]), fill, dtype=value.dtype)
        out[key] = torch.cat([pad, value], 1)
    return out
