"""Loaded prompt rows given shorter prompts: re-rendered, re-tokenized and left-padded again.

A loaded prompt can hold more than a given-response trainer's rows are trained after (SFT's
whole conversation, DPO's whole chosen response in the implicit-prompt layout); validation
samples from the prompt each row is trained after. The trainer works out that prompt (the
cut); :func:`reprompt` gives the batch those prompts as the loader would have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hfsdk import Batch
from hfsdk_datasets import Messages


def reprompt(
    prompts: Batch,
    cuts: Mapping[int, str | Messages],
    tokenizer: Any,
    *,
    use_template: bool,
    tools: Callable[[], Sequence[Any]],
    where: Callable[[int], str],
    tools_key: str = "",
) -> Batch:
    """``prompts`` with row ``i``'s prompt replaced by ``cuts[i]`` (text or checked messages).

    Each cut is rendered and tokenized as the loader does (``use_template``) with the row's own
    tool schemas from column ``tools_key`` (a list or its JSON string), as training renders the
    row; a row without them (no such column, ``None``, or ``tools_key`` empty) gets the run's
    from ``tools`` (asked at most once, and only for such a cut), as the loader renders it. The
    whole batch is left-padded again: ``input_ids``, ``attention_mask`` and ``position_ids``
    (when present) are new, and so are the ``raw_prompt``, ``prompt_messages`` and
    ``rendered_prompt`` columns the batch has. Rows not in ``cuts`` keep their tokens; other
    columns are kept. ``where(i)`` names row ``i`` in errors. With no cuts ``prompts`` itself is
    returned; otherwise a new batch (the caller's is left as it was).
    """
    import torch

    from hfsdk import PROMPT_MESSAGES, RENDERED_PROMPT
    from hfsdk_datasets import check_tools, plain_rendering, render_prompt

    if not cuts:
        return prompts
    names = set(prompts.non_tensor_keys)
    own = list(prompts[tools_key]) if tools_key and tools_key in names else None
    run_schemas: list[Any] | None = None
    ids = [
        row[mask.bool()].tolist()
        for row, mask in zip(prompts["input_ids"], prompts["attention_mask"], strict=True)
    ]
    messages = list(prompts[PROMPT_MESSAGES]) if PROMPT_MESSAGES in names else None
    raw = list(prompts["raw_prompt"]) if "raw_prompt" in names else None
    rendered = list(prompts[RENDERED_PROMPT]) if RENDERED_PROMPT in names else None
    for i, prompt in cuts.items():
        # The row's own tools first: training renders the row with them, and without them
        # validation sampled after a prompt that never showed the tools it was trained on.
        schemas = (
            check_tools(own[i], f"{where(i)}, column {tools_key!r}")
            if own is not None and own[i] is not None
            else None
        )
        if schemas is None:
            if run_schemas is None:
                run_schemas = list(tools())
            schemas = run_schemas
        text = render_prompt(prompt, tokenizer, use_template, schemas, where(i))
        # The loader's call, so a cut prompt has the ids a row with only that prompt would have.
        ids[i] = list(tokenizer(text, add_special_tokens=not use_template)["input_ids"])
        # What the loader records for a text prompt (no messages) or a messages one.
        if messages is not None:
            messages[i] = None if isinstance(prompt, str) else prompt
        if raw is not None:
            raw[i] = prompt if isinstance(prompt, str) else plain_rendering(prompt)
        if rendered is not None:
            rendered[i] = text
    width = max(len(row) for row in ids)
    input_ids = torch.full((len(ids), width), int(tokenizer.pad_token_id), dtype=torch.long)
    attention_mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, tokens in enumerate(ids):
        if tokens:
            input_ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
            attention_mask[row, width - len(tokens) :] = 1
    out = prompts.select()  # new columns for the cut rows; the caller's batch is left as it was
    out["input_ids"] = input_ids
    out["attention_mask"] = attention_mask
    if "position_ids" in out.tensor_keys:
        out["position_ids"] = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    if messages is not None:
        out[PROMPT_MESSAGES] = messages
    if raw is not None:
        out["raw_prompt"] = raw
    if rendered is not None:
        out[RENDERED_PROMPT] = rendered
    return out
