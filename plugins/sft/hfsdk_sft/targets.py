"""A step's prompt rows -> the supervised batch ``update_actor`` trains on.

The trainer's data stream hands the program every column of each row; the
response to train on is read from the row (``algorithm.messages_key`` or
``algorithm.response_key``) and tokenized after the prompt with the run's
tokenizer by ``hfsdk_supervised_data.tokenize_supervised`` (assistant tokens only in the mask).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from hfsdk import Batch, HfsdkError
from hfsdk_datasets import check_messages, check_tools
from hfsdk_sft.sft_config import SFTConfig
from hfsdk_supervised_data import (
    SupervisedSequence,
    collate_supervised,
    reprompt,
    split_conversation,
    tokenize_supervised,
)


def row_sequence(
    row: Mapping[str, Any],
    tokenizer: Any,
    *,
    config: SFTConfig,
    prompt_key: str,
    use_template: bool,
    where: str,
) -> SupervisedSequence:
    """One row's prompt and response as token ids with the assistant-token mask."""
    tools = check_tools(row.get(config.tools_key), f"{where}, column {config.tools_key!r}")
    options: dict[str, Any] = {
        "use_template": use_template,
        "append_eos": config.append_eos,
        "tools": tools,
    }
    conversation = row.get(config.messages_key)
    if conversation is not None:
        messages = check_messages(conversation, f"{where}, column {config.messages_key!r}")
        prompt, response = split_conversation(messages, f"{where}, {config.messages_key!r}")
        return tokenize_supervised(prompt, response, tokenizer, where=where, **options)
    value = row.get(config.response_key)
    if value is None:
        raise HfsdkError(
            f"{where} has neither a {config.messages_key!r} conversation nor a "
            f"{config.response_key!r} response (columns: {sorted(map(str, row))}); set "
            "algorithm.messages_key or algorithm.response_key to the column to train on"
        )
    raw_prompt = row[prompt_key]
    prompt: Any = (
        raw_prompt
        if isinstance(raw_prompt, str)
        else check_messages(raw_prompt, f"{where}, column {prompt_key!r}")
    )
    value = _python_scalar(value)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        response: Any = str(value)  # e.g. the default task's numeric answers
    else:
        response = check_messages(value, f"{where}, column {config.response_key!r}")
    return tokenize_supervised(prompt, response, tokenizer, where=where, **options)


def _python_scalar(value: Any) -> Any:
    """``value`` as a Python scalar when it is a numpy one, else unchanged.

    A ``Batch`` column of numbers holds numpy scalars (``np.int64`` is no ``int``), so a
    numeric response column would otherwise be refused; ``np.bool_`` becomes ``bool``,
    which stays refused.
    """
    import numpy as np

    return value.item() if isinstance(value, np.generic) else value


def context_prompts(
    prompts: Batch,
    tokenizer: Any,
    *,
    config: SFTConfig,
    prompt_key: str,
    use_template: bool,
    tools: Callable[[], Sequence[Any]],
) -> Batch:
    """``prompts`` whose whole conversations are cut before their first assistant message.

    With ``data.prompt_key`` naming ``algorithm.messages_key`` (a messages-only dataset,
    docs/algorithms.md) the loader renders the whole conversation as the prompt, its reference
    answer included (with a template as a prefill of it), so validation sampled after the
    answer. The prompt a row is trained after is the context before its first assistant
    message (``split_conversation``); each such row gets that prompt as the loader would
    have given it (``hfsdk_supervised_data.reprompt``). Other batches are returned as they
    are; the rows' own columns are kept. A cut is rendered with the row's own tool schemas
    (``algorithm.tools_key``), as training renders it, else ``tools``: the run's (asked only
    for a cut without its own).
    """
    from hfsdk import PROMPT_MESSAGES

    if prompt_key != config.messages_key or PROMPT_MESSAGES not in prompts.non_tensor_keys:
        return prompts
    conversations = list(prompts[PROMPT_MESSAGES])
    uids = list(prompts["uid"]) if "uid" in prompts.non_tensor_keys else list(range(len(prompts)))

    def where(i: int) -> str:
        return f"validation row {uids[i]} of column {prompt_key!r}"

    cuts = {
        i: split_conversation(list(messages), where(i))[0]
        for i, messages in enumerate(conversations)
        if messages and any(m.get("role") == "assistant" for m in messages)
    }
    return reprompt(
        prompts, cuts, tokenizer, use_template=use_template, tools=tools, where=where,
        tools_key=config.tools_key,
    )  # fmt: skip


@attrs.frozen(kw_only=True)
class SupervisedRows:
    """A step's tokenized rows as one batch (``None`` if all were dropped) and the drop count."""

    batch: Batch | None
    dropped: int


def supervised_batch(
    prompts: Batch,
    tokenizer: Any,
    *,
    config: SFTConfig,
    prompt_key: str,
    use_template: bool,
) -> SupervisedRows:
    """The rows of ``prompts`` (with every dataset column) as one supervised batch.

    Tensors: the workers' sequence layout (``hfsdk_supervised_data.collate_supervised``) plus
    ``advantages`` (the mask, unused by ``nll``) and zero ``old_log_probs`` (the
    loss needs no sampling policy, so no extra forward pass is run for one).
    """
    import torch

    columns = [k for k in prompts.non_tensor_keys]
    sequences = []
    dropped = 0
    for index in range(len(prompts)):
        row = {k: prompts[k][index] for k in columns}
        where = f"row {row.get('uid', index)}"
        seq = row_sequence(
            row,
            tokenizer,
            config=config,
            prompt_key=prompt_key,
            use_template=use_template,
            where=where,
        )
        total = len(seq.prompt_ids) + len(seq.response_ids)
        if config.max_length is not None and total > config.max_length:
            dropped += 1
            continue
        sequences.append(seq)
    if not sequences:
        return SupervisedRows(batch=None, dropped=dropped)
    tensors = collate_supervised(sequences, tokenizer.pad_token_id)
    mask = tensors["response_mask"]
    tensors["advantages"] = mask.float()
    tensors["old_log_probs"] = torch.zeros(mask.shape, dtype=torch.float32)
    return SupervisedRows(batch=Batch.from_dict(tensors=tensors), dropped=dropped)
