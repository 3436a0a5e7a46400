"""Columns ``datasets`` keeps as JSON text, checked against the file they came from.

Where a jsonl column mixes types (strings in some rows, numbers or objects in
others), ``datasets`` stores it as a ``Json`` feature and parses every stored
value back with a JSON parser, strings included: ``"007"`` comes back as ``7``,
``"1e3"`` as ``1000.0`` and ``"[1]"`` as a list, without a word. A reward
function or a supervised target would then see other data than the file holds.
:func:`check_json_columns` reads the file's own rows and refuses the dataset in
one line where a value came back changed. Columns of objects with differing keys
(also ``Json``) come back as written and pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hfsdk import HfsdkError


def _holds_json(feature: Any) -> bool:
    import datasets

    if isinstance(feature, datasets.Json):
        return True
    if isinstance(feature, dict):
        return any(_holds_json(f) for f in feature.values())
    inner = getattr(feature, "feature", None)  # List, LargeList, Sequence
    return inner is not None and _holds_json(inner)


def _raw_rows(path: Path) -> Iterator[Any]:
    """The file's rows as JSON gives them: a top-level list, or one per line.

    The layout comes from the content, not the suffix, as ``datasets`` reads it: a .jsonl
    file may hold one array (pretty-printed or on one line), a .json file lines.
    """
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from json.loads(stripped)
        return
    try:
        rows = [json.loads(line) for line in text.split("\n") if line.strip()]
    except json.JSONDecodeError:
        # One pretty-printed object (datasets reads a dict of columns): no rows to compare.
        return
    yield from rows


def check_json_columns(dataset: Any, path: Path, name: str) -> None:
    """Refuse ``dataset`` (loaded from the json/jsonl file ``path``, called ``name``) when a
    ``Json`` column reads back otherwise than the file holds (see the module docstring)."""
    columns = [c for c, feature in dataset.features.items() if _holds_json(feature)]
    if not columns:
        return
    loaded = dataset.select_columns(columns)
    for index, (raw, row) in enumerate(zip(_raw_rows(path), loaded, strict=False)):
        if not isinstance(raw, dict):
            return  # not rows of objects: datasets read another layout; nothing to compare
        for column in columns:
            written, read = raw.get(column), row[column]
            if written != read:
                raise HfsdkError(
                    f"dataset {name!r}: column {column!r} mixes types across rows, and row "
                    f"{index}'s {written!r} reads back as {read!r}; give the column one type "
                    "in every row (e.g. quote every value, or make every value an object)"
                )
