"""The parts a prompt dataset is read from: whose data they are (training or validation),
which split of a saved ``DatasetDict`` they use, and whether they concatenate.

A run reads ``data.train_files`` and ``data.val_files`` with the same loader; these
helpers let its choices and its errors say which of the two it is reading.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk import HfsdkError

logger = logging.getLogger(__name__)

TRAIN_SPLITS = ("train",)
"""The split a ``DatasetDict`` of several gives the training data."""
VALIDATION_SPLITS = ("validation", "test")
"""The splits (first present wins) a ``DatasetDict`` of several gives the validation data."""


def data_label(validation: bool) -> str:
    """``"validation"`` or ``"training"``: whose prompts, for messages."""
    return "validation" if validation else "training"


def files_key(validation: bool) -> str:
    """The config key that lists the files: ``data.val_files`` or ``data.train_files``."""
    return "data.val_files" if validation else "data.train_files"


def data_description(validation: bool, files: Sequence[str]) -> str:
    """E.g. ``"the validation data (data.val_files: a.jsonl, b.jsonl)"``."""
    described = f"the {data_label(validation)} data"
    if files:
        described += f" ({files_key(validation)}: {', '.join(map(str, files))})"
    return described


def pick_split(loaded: Mapping[str, Any], name: str, validation: bool) -> Any:
    """The split of a saved ``DatasetDict`` that ``name`` holds for this data.

    A lone split is used whatever its name; otherwise training takes ``train`` and
    validation ``validation``, then ``test``. Taking some other split silently would
    train on validation rows or validate on training rows, so an absent one is an error.
    """
    splits = list(loaded)
    if len(splits) == 1:
        chosen = splits[0]
    else:
        wanted = VALIDATION_SPLITS if validation else TRAIN_SPLITS
        chosen = next((split for split in wanted if split in loaded), "")
        if not chosen:
            looked_for = " or ".join(repr(split) for split in wanted)
            raise HfsdkError(
                f"dataset directory {name!r} holds the splits {splits} but no {looked_for} "
                f"split for the {data_label(validation)} data; point {files_key(validation)} "
                f"at {name.rstrip('/')}/<split> (e.g. {name.rstrip('/')}/{splits[0]})"
            )
    logger.info(
        "dataset directory %r: using its %r split (of %s) for the %s data",
        name,
        chosen,
        ", ".join(splits),
        data_label(validation),
    )
    return loaded[chosen]


def concatenate_parts(datasets: Any, parts: Sequence[Any], names: Sequence[str]) -> Any:
    """``parts`` (read from ``names``) as one dataset; a column the files give different
    types is one line naming the files, the column and both types (``datasets`` would
    stop with an internal error). Arrow's 64-bit-offset types (``large_string``, as
    pandas 3 writes) join their plain twins; columns some files lack are warned about."""
    clash = find_type_clash(parts, names)
    if clash is not None:
        raise HfsdkError(clash)
    warn_missing_columns(parts, names)
    if any(part.features != parts[0].features for part in parts):
        # concatenate_datasets refuses large_string beside string: every part gets the
        # plain types, so the files join in any order.
        parts = [_plain_typed(datasets, part) for part in parts]
        parts = _null_fields_typed(datasets, parts)
    try:
        return datasets.concatenate_datasets(list(parts))
    except ValueError as exc:  # a mismatch find_type_clash does not foresee
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HfsdkError(
            f"dataset files {list(names)} cannot be joined ({first}); give every column one "
            "type in every file"
        ) from None


def warn_missing_columns(parts: Sequence[Any], names: Sequence[str]) -> None:
    """Warn once when the files have different column sets: their rows get ``None`` where a
    column is missing, which is right for an optional column but hides a misspelt one."""
    missing: dict[str, list[str]] = {}
    for part in parts:
        for column in part.column_names:
            if column not in missing:
                missing[column] = [
                    str(name)
                    for other, name in zip(parts, names, strict=True)
                    if column not in other.column_names
                ]
    gaps = [
        f"{column!r} is missing from {', '.join(map(repr, lacking))}"
        for column, lacking in missing.items()
        if lacking
    ]
    if gaps:
        logger.warning(
            "dataset files differ in their columns: %s; those rows get None there (check the "
            "column names if that is not meant)",
            "; ".join(gaps),
        )


def _plain_typed(datasets: Any, part: Any) -> Any:
    """``part`` with every large Arrow type cast to its plain twin (a copy only if needed)."""
    features = _plain_feature(datasets, part.features)
    return part if features == part.features else part.cast(datasets.Features(features))


_PLAIN_DTYPES = {"large_string": "string", "large_binary": "binary"}
"""Arrow's 64-bit-offset types and the 32-bit ones holding the same values."""


def _plain_feature(datasets: Any, feature: Any) -> Any:
    """``feature`` with ``large_string``/``large_binary``/``LargeList`` made plain, at any depth."""
    if isinstance(feature, dict):
        return {key: _plain_feature(datasets, inner) for key, inner in feature.items()}
    if isinstance(feature, datasets.LargeList):
        return datasets.List(_plain_feature(datasets, feature.feature))
    if isinstance(feature, datasets.List):
        return datasets.List(_plain_feature(datasets, feature.feature), length=feature.length)
    if isinstance(feature, datasets.Value) and feature.dtype in _PLAIN_DTYPES:
        return datasets.Value(_PLAIN_DTYPES[feature.dtype])
    return feature


def find_type_clash(parts: Sequence[Any], names: Sequence[str]) -> str | None:
    """The error for the first column two of ``parts`` give different types, else ``None``.

    Mirrors ``datasets``' own rule: null-typed columns (all values missing) fit any
    type, and records are compared field by field.
    """
    first: dict[str, tuple[Any, str]] = {}
    for part, name in zip(parts, names, strict=True):
        for column, feature in part.features.items():
            known = first.get(column)
            if known is None or _is_null(known[0]):
                first[column] = (feature, name)
                continue
            clash = _clash(known[0], feature, column)
            if clash is not None:
                path, before, after = clash
                return (
                    f"dataset files {known[1]!r} and {name!r} give column {path!r} different "
                    f"types ({type_name(before)} in the first, {type_name(after)} in the "
                    "second); give the column one type in every file (e.g. quote every value, "
                    "or write every prompt as chat messages)"
                )
    return None


def _clash(before: Any, after: Any, path: str) -> tuple[str, Any, Any] | None:
    """``(column path, type, other type)`` where ``after`` cannot join ``before``; a
    null-typed field fits any type at any depth (inside lists of records too)."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in before.keys() & after.keys():
            inner = _clash(before[key], after[key], f"{path}.{key}")
            if inner is not None:
                return inner
        return None
    if _is_null(before) or _is_null(after) or before == after:
        return None
    if _is_list(before) and _is_list(after):
        inner = _clash(before.feature, after.feature, path)
        if inner is None:
            return None
        # Name the lists' types, as a reader sees the column, unless a list is not the issue.
        return inner if isinstance(before.feature, dict) else (path, before, after)
    import datasets

    if _plain_feature(datasets, before) == _plain_feature(datasets, after):
        return None  # large_string and string hold the same values: cast when joined
    return path, before, after


def _is_list(feature: Any) -> bool:
    """Whether ``feature`` is a list type (``List``, ``LargeList``) with an item feature."""
    return hasattr(feature, "feature") and not isinstance(feature, dict)


def _filled(datasets: Any, feature: Any, other: Any) -> Any:
    """``feature`` with each null-typed field (at any depth) given ``other``'s type there."""
    if _is_null(feature) and not _is_null(other):
        return other
    if isinstance(feature, dict) and isinstance(other, dict):
        return {
            key: _filled(datasets, inner, other[key]) if key in other else inner
            for key, inner in feature.items()
        }
    if _is_list(feature) and _is_list(other) and type(feature) is type(other):
        inner = _filled(datasets, feature.feature, other.feature)
        if inner is feature.feature:
            return feature
        if isinstance(feature, datasets.List):
            return datasets.List(inner, length=feature.length)
        return type(feature)(inner)
    return feature


def _null_fields_typed(datasets: Any, parts: Sequence[Any]) -> list[Any]:
    """``parts`` with every null-typed field cast to the type another part gives it: Arrow
    joins a null column to any type, but not a null field inside a record
    (``{bytes, path: null}`` beside ``{bytes, path: string}``)."""
    typed = []
    for part in parts:
        features = dict(part.features)
        for other in parts:
            for column, feature in features.items():
                if column in other.features:
                    features[column] = _filled(datasets, feature, other.features[column])
        same = features == dict(part.features)
        typed.append(part if same else part.cast(datasets.Features(features)))
    return typed


def _is_null(feature: Any) -> bool:
    """Whether ``feature`` is ``datasets``' null type (or a list of it): it joins any type."""
    dtype = getattr(feature, "dtype", None)
    if isinstance(dtype, str) and not hasattr(feature, "feature"):
        return dtype == "null"
    inner = getattr(feature, "feature", None)  # List, LargeList, Sequence
    return inner is not None and _is_null(inner)


def type_name(feature: Any) -> str:
    """A column type as a reader thinks of it: ``string``, ``int64``, ``list of objects
    {role, content}``."""
    if isinstance(feature, dict):
        return "object {" + ", ".join(map(str, feature)) + "}"
    inner = getattr(feature, "feature", None)
    if inner is not None:
        named = type_name(inner)
        return f"list of {named.replace('object', 'objects', 1)}"
    dtype = getattr(feature, "dtype", None)
    return str(dtype) if dtype is not None else type(feature).__name__
