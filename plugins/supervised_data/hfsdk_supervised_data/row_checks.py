"""Every loaded row checked before a run starts, as a step would tokenize it.

A step tokenizes its own rows' given responses, so a bad row (no assistant turn, an
empty rejected response) used to stop the run at the step that drew it, hours in and
after the last checkpoint. The algorithms' preflight checks walk all rows up front instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

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


def check_preference_rows(
    prepared: Any,
    tokenizer: Any,
    *,
    use_template: bool,
    columns: PairColumns,
    append_eos: bool = True,
) -> None:
    """Tokenize every row's pair as a step will; the first bad one raises, naming it."""
    wanted = {columns.chosen, columns.rejected}
    for where, row in prepared_rows(prepared, lambda row: wanted <= set(row)):
        tokenize_preference_pair(
            row, tokenizer, use_template=use_template, columns=columns, append_eos=append_eos,
            where=where,
        )  # fmt: skip
