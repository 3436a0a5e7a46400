"""Every loaded row checked before a run starts, as a step would tokenize it.

A step tokenizes its own rows' given responses, so a bad row (no assistant turn, an
empty rejected response) used to stop the run at the step that drew it, hours in and
after the last checkpoint. The algorithms' preflight checks walk all rows up front instead,
and refuse a row longer than the model's positions that ``algorithm.max_length`` keeps
(transformers only warns; the step then fails or trains past the model's context).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from hfsdk import HfsdkError
from hfsdk_supervised_data.preference_pairs import PairColumns, tokenize_preference_pair


def prepared_rows(
    prepared: Any, needs: Callable[[Mapping[str, Any]], bool]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(where, row)`` of every training row and of each validation row that ``needs`` (has
    responses to score: validation may hold prompts only)."""
    for label, loader in (("row", prepared.loader), ("validation row", prepared.val_loader)):
        for index, row in enumerate(loader.rows if loader is not None else ()):
            if label == "row" or needs(row):
                yield f"{label} {row.get('uid', index)}", row


def model_positions(model_path: str | None) -> int | None:
    """The positions of the local model at ``model_path``; ``None`` where unknown."""
    if not model_path:
        return None
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_path).get_text_config()
    except (OSError, ValueError):
        return None
    value = getattr(config, "max_position_embeddings", None)  # GPT-2's n_positions maps here
    return value if isinstance(value, int) and value > 0 else None


def check_fits(longest: tuple[int, str] | None, prepared: Any, max_length: int | None) -> None:
    """Refuse the longest row, ``(tokens, where)``, when it outgrows the model's positions
    and ``max_length`` would keep it."""
    positions = model_positions(prepared.assets.model_path)
    if longest is None or positions is None:
        return
    tokens, where = longest
    if tokens > positions and (max_length is None or max_length > positions):
        raise HfsdkError(
            f"{where} is {tokens} tokens, more than the {positions} positions of the model "
            f"({prepared.assets.model_path}); set algorithm.max_length to at most {positions} "
            "(longer rows are then left out) or shorten the row"
        )


def check_validation_pairs(prepared: Any, columns: PairColumns) -> None:
    """Refuse a validation row without both responses, for a run that scores every
    validation row as a pair (a reward model): it would stop at the first validation."""
    loader = prepared.val_loader
    for index, row in enumerate(loader.rows if loader is not None else ()):
        missing = [key for key in (columns.chosen, columns.rejected) if row.get(key) is None]
        if missing:
            raise HfsdkError(
                f"data.val_files row {row.get('uid', index)} has no {missing[0]!r} column value "
                f"(columns: {sorted(row)}); this run scores every validation row as a preference "
                f"pair: give data.val_files rows with {columns.chosen!r} and {columns.rejected!r}"
            )


def check_some_fit(
    lengths: list[tuple[int, str]], max_length: int | None, what: str, use: str
) -> None:
    """Refuse when every one of ``lengths`` (``(tokens, where)`` each: the training rows or
    pairs, or the validation ones), named ``what`` in the message, is longer than
    ``max_length``: the steps drop such rows and draw others, which cannot help when none
    would be left (``use``: what none of them could be)."""
    if not max_length or not lengths or any(tokens <= max_length for tokens, _ in lengths):
        return
    tokens, where = lengths[0]
    shortest = min(length for length, _ in lengths)
    raise HfsdkError(
        f"all {len(lengths)} {what} are longer than algorithm.max_length={max_length} tokens "
        f"(first: {where}, {tokens} tokens), so none could be {use}; raise "
        f"algorithm.max_length to at least {shortest}"
    )


def check_preference_rows(
    prepared: Any,
    tokenizer: Any,
    *,
    use_template: bool,
    columns: PairColumns,
    append_eos: bool = True,
    max_length: int | None = None,
    validation_needs_pairs: bool = False,
    refuse_longer: bool = False,
) -> None:
    """Tokenize every row's pair as a step will; the first bad one raises, naming it, and so
    does a pair longer than the model's positions that ``max_length`` keeps.

    ``validation_needs_pairs``: every validation row must be a pair (a reward model scores
    each one); otherwise prompt-only validation rows are skipped (DPO and SFT sample them).
    ``refuse_longer``: refuse a run all of whose training pairs (or, with
    ``validation_needs_pairs``, all of whose validation pairs) are longer than ``max_length``
    (a step drops over-long pairs and draws others).
    """
    wanted = {columns.chosen, columns.rejected}
    if validation_needs_pairs:
        check_validation_pairs(prepared, columns)
    lengths: list[tuple[int, str]] = []
    for where, row in prepared_rows(prepared, lambda row: wanted <= set(row)):
        pair = tokenize_preference_pair(
            row, tokenizer, use_template=use_template, columns=columns, append_eos=append_eos,
            where=where,
        )  # fmt: skip
        lengths.append((pair.length(), where))
    longest = max(lengths, key=lambda item: item[0], default=None)
    check_fits(longest, prepared, max_length)
    if refuse_longer:  # validation pairs only where every validation row is scored as one
        for part in ("row ", "validation row ") if validation_needs_pairs else ("row ",):
            part_lengths = [x for x in lengths if x[1].startswith(part)]
            what = f"preference pairs ({part.strip()}s)"
            check_some_fit(part_lengths, max_length, what, "trained or scored")
