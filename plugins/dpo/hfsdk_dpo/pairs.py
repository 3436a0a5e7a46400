"""A step's rows -> the interleaved preference-pair batch the DPO program works on."""

from __future__ import annotations

from typing import Any

import attrs

from hfsdk import ROW_GROUP, Batch
from hfsdk_dpo.dpo_config import DPOConfig
from hfsdk_supervised_data import PairColumns, collate_preference_pairs, tokenize_preference_pair


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
