"""A step's rows -> the interleaved preference-pair batch the DPO program works on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from hfsdk import ROW_GROUP, Batch
from hfsdk_dpo.dpo_config import DPOConfig
from hfsdk_supervised_data import (
    PairColumns,
    collate_preference_pairs,
    reprompt,
    tokenize_preference_pair,
)


@attrs.frozen(kw_only=True)
class PairRows:
    """The step's pairs as one batch (``None`` if every pair was dropped) and the drop count."""

    batch: Batch | None
    dropped: int


def pair_columns(config: DPOConfig, prompt_key: str) -> PairColumns:
    """The pair's columns; no prompt column when ``data.prompt_key`` names a response column
    (implicit-prompt data: the prompt is what both responses begin with)."""
    return PairColumns.read_by(
        prompt_key, config.chosen_key, config.rejected_key, tools=config.tools_key
    )


def pair_batch(
    rows: Batch, tokenizer: Any, *, config: DPOConfig, prompt_key: str, use_template: bool
) -> PairRows:
    """Every row of ``rows`` (a batch with the dataset's columns) as a tokenized pair.

    The prompt column is used unless ``data.prompt_key`` names a response column
    (``chosen_key`` or ``rejected_key``, for implicit-prompt data).
    """
    columns = pair_columns(config, prompt_key)
    keys = list(rows.non_tensor_keys)
    pairs = []
    dropped = 0
    for index in range(len(rows)):
        row = {k: rows[k][index] for k in keys}
        pair = tokenize_preference_pair(
            row,
            tokenizer,
            use_template=use_template,
            columns=columns,
            append_eos=config.append_eos,
            where=f"row {row.get('uid', index)}",
        )
        if config.max_length is not None and pair.length() > config.max_length:
            dropped += 1
            continue
        pairs.append(pair)
    if not pairs:
        return PairRows(batch=None, dropped=dropped)
    batch = collate_preference_pairs(pairs, tokenizer.pad_token_id)
    batch.meta[ROW_GROUP] = 2
    return PairRows(batch=batch, dropped=dropped)


def context_prompts(
    prompts: Batch,
    tokenizer: Any,
    *,
    config: DPOConfig,
    prompt_key: str,
    use_template: bool,
    tools: Callable[[], Sequence[Any]],
) -> Batch:
    """``prompts`` whose loaded prompt is a whole response, cut to their pair's prompt.

    With ``data.prompt_key`` naming a response column (the implicit-prompt layout,
    docs/algorithms.md) the loader renders the whole chosen response as the prompt (with a
    template, messages as a prefill of the chosen answer), so validation sampled after the
    answer. A pair is trained after the prompt both responses begin with
    (``split_prompt``: their shared leading messages, or text cut back to whitespace); each
    pair row gets that prompt as the loader would have given it
    (``hfsdk_supervised_data.reprompt``). Other batches (an explicit prompt column) and rows
    without both responses are returned as they are; the rows' own columns are kept.
    A cut is rendered with the row's own tool schemas (``algorithm.tools_key``), as training
    renders the pair, else ``tools``: the run's (asked only for a cut without its own).
    """
    from hfsdk_supervised_data.preference_pairs import split_prompt

    columns = pair_columns(config, prompt_key)
    names = set(prompts.non_tensor_keys)
    if columns.prompt or not {columns.chosen, columns.rejected} <= names:
        return prompts
    chosen, rejected = list(prompts[columns.chosen]), list(prompts[columns.rejected])
    uids = list(prompts["uid"]) if "uid" in names else list(range(len(prompts)))

    def where(i: int) -> str:
        return f"validation row {uids[i]} of column {prompt_key!r}"

    cuts = {
        i: split_prompt(
            {columns.chosen: chosen[i], columns.rejected: rejected[i]}, columns, where(i)
        )[0]
        for i in range(len(prompts))
        if chosen[i] is not None and rejected[i] is not None
    }
    return reprompt(
        prompts, cuts, tokenizer, use_template=use_template, tools=tools, where=where,
        tools_key=config.tools_key,
    )  # fmt: skip
