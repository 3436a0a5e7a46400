"""A text-only micro-batch of a sharded model still runs the vision tower, changing nothing."""

from __future__ import annotations

import copy

import torch

from hfsdk_vision.forward_inputs import _run_tower_in_next_forward
from hfsdk_vision.tokens import expand_placeholders


def test_a_blank_tower_pass_leaves_the_logits_and_reaches_every_block(vlm) -> None:
    """Under FSDP every rank must run the tower's sharded blocks in each forward (a rank whose
    rows have images does); a rank without images runs it on a blank image at 0 weight."""
    model, processor = vlm
    model = copy.deepcopy(model)  # the session's model is shared: train a copy
    enc = processor([expand_placeholders("what colour is the square ?")], [[]])
    inputs = {k: enc[k] for k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        plain = model(**inputs).logits
    _run_tower_in_next_forward(model)
    logits = model(**inputs).logits
    torch.testing.assert_close(logits, plain, atol=0, rtol=0)
    logits.sum().backward()
    blocks = [p.grad for p in model.model.visual.blocks.parameters()]
    assert blocks and all(g is not None for g in blocks)  # the backward's collectives run too
    model.zero_grad(set_to_none=True)
    model(**inputs).logits.sum().backward()  # one forward only: the hook is gone
    assert all(p.grad is None for p in model.model.visual.blocks.parameters())
