"""The share of a dataset's tokens the tokenizer cannot read (its unknown token).

A word-level tokenizer (the built-in task's) maps every word it never saw to
``<unk>``: a prompt of one's own may reach the model as mostly unknown tokens
while every other check passes. ``hfsdk data inspect`` reports the share per
text column; the preflight stops a run whose prompts exceed
``data.max_unknown_token_share`` before Ray starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk import HfsdkError
from hfsdk_datasets.columns import reward_column_names

SAMPLE_ROWS = 512
"""Rows looked at per column (the first ones): enough for a share, cheap on a large set."""


def _share(tokenizer: Any, ids: Sequence[Sequence[int]]) -> float:
    unk = tokenizer.unk_token_id
    total = sum(len(row) for row in ids)
    if unk is None or not total:
        return 0.0
    return sum(row.count(unk) for row in ids) / total


def unknown_token_shares(
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    prompt_ids: Sequence[Sequence[int]],
    prompt_key: str,
) -> dict[str, float]:
    """Column -> share of its tokens that are the tokenizer's unknown token.

    The prompt column is measured on the tokens the model gets (rendered
    prompts); other columns holding text are tokenized as they are. A tokenizer
    without an unknown token (byte-level BPE) reads everything: ``{}``.
    """
    if tokenizer.unk_token_id is None or not rows:
        return {}
    shares = {prompt_key: _share(tokenizer, prompt_ids[:SAMPLE_ROWS])}
    for column in reward_column_names(rows[0]):
        if column == prompt_key:
            continue
        texts = [row.get(column) for row in rows[:SAMPLE_ROWS]]
        if not all(isinstance(t, str) for t in texts):
            continue  # numbers, nested records, messages: not text a model reads
        ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        shares[column] = _share(tokenizer, ids)
    return shares


def check_prompt_tokens(
    share: float,
    limit: float,
    prompt_key: str,
    tokenizer_path: str,
    example: str,
    *,
    builtin: bool = False,
    data: str = "",
) -> None:
    """One-line error when more than ``limit`` of the prompt tokens are unknown; ``data``
    names whose prompts they are (e.g. ``"the validation data (data.val_files: v.jsonl)"``)."""
    if share <= limit:
        return
    why = (
        "the built-in model's word-level tokenizer reads only its own task's words"
        if builtin
        else "the model would see mostly the unknown token"
    )
    of = f" of {data}" if data else ""
    raise HfsdkError(
        f"{share:.0%} of the prompt tokens (column {prompt_key!r}){of} are unknown to the "
        f"tokenizer in {tokenizer_path!r} (e.g. {example[:60]!r}); {why}: set actor.model_path (or "
        "actor.tokenizer_path) to a model whose tokenizer reads your data, run a built-in task "
        f"with --task, or raise data.max_unknown_token_share (now {limit})"
    )


def check_loaded_prompts(
    tokenizer: Any,
    token_ids: Sequence[Sequence[int]],
    rows: Sequence[Mapping[str, Any]],
    limit: float,
    prompt_key: str,
    tokenizer_path: str,
    *,
    builtin: bool,
    data: str = "",
) -> None:
    """Stop (one line) when more than ``limit`` of the loaded prompts' tokens are unknown
    (``data``: whose prompts, as :func:`check_prompt_tokens` names them)."""
    unk = tokenizer.unk_token_id
    if unk is None or limit >= 1.0 or not token_ids:
        return
    ids = token_ids[:SAMPLE_ROWS]
    share = _share(tokenizer, ids)
    worst = max(range(len(ids)), key=lambda i: ids[i].count(unk) / max(1, len(ids[i])))
    example = str(rows[worst].get("raw_prompt", ""))
    check_prompt_tokens(
        share, limit, prompt_key, tokenizer_path, example, builtin=builtin, data=data
    )
