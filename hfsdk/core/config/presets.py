"""Merging a task's preset under a user's config (generic dict merging, no task named).

The generic config defaults suit real models; a built-in task's model is tiny,
so it needs a larger learning rate and short responses. When a run names no
training data (``data.train_files`` empty), the algorithm plugin's preset
(``AlgorithmSpec.preset``) on top of the default task's own preset
(``hfsdk.Task.preset``, from the task registry) is merged *under* the user's
config: anything the user sets still wins. ``hfsdk config show`` prints the result.

A preset says what the task needs (response length, batch sizes, learning
rates), never which backend runs it: each preset section is applied to
whatever config class the section resolves to (the user's ``backend`` or the
declared default), and keys that class does not have (checked against its
attrs fields, nested sections included) are left out. So a new backend takes
the preset keys it shares with the others and no algorithm changes.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Callable, Mapping
from typing import Any

import attrs


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` on top, recursively (``override`` wins)."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def uses_default_task(data: Mapping[str, Any]) -> bool:
    """Whether a raw config names no training data (so the default task of the task
    registry runs)."""
    section = data.get("data") or {}
    return not (isinstance(section, Mapping) and section.get("train_files"))


def _nested_class(cls: type, field: attrs.Attribute) -> type | None:
    """The attrs class of a nested section field (``optim: OptimConfig``), else ``None``."""
    default = field.default
    if isinstance(default, attrs.Factory) and not default.takes_self:  # type: ignore[arg-type]
        made = type(default.factory())
        if attrs.has(made):
            return made
    try:
        hint = typing.get_type_hints(cls).get(field.name)
    except (NameError, TypeError):  # an annotation that only resolves under TYPE_CHECKING
        return None
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and attrs.has(candidate):
            return candidate
    return None


def keys_for(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``values`` whose keys are fields of the attrs class ``cls`` (recursively).

    A mapping under a field whose type is itself an attrs class is filtered the
    same way; any other value is kept whole.
    """
    fields = {f.name: f for f in attrs.fields(cls)}
    kept: dict[str, Any] = {}
    for key, value in values.items():
        field = fields.get(key)
        if field is None:
            continue
        nested = _nested_class(cls, field) if isinstance(value, Mapping) else None
        if nested is not None:
            value = keys_for(nested, value)
            if not value:
                continue
        kept[key] = copy.deepcopy(value)
    return kept


def with_default_task_preset(
    preset: Mapping[str, Any],
    data: Mapping[str, Any],
    section_class: Callable[[str], type | None] = lambda _section: None,
    *,
    task_preset: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``data`` on top of ``task_preset`` (the task's own: ``hfsdk.Task.preset``) and
    ``preset`` (the algorithm's) when it runs the default task.

    ``section_class(section)`` is the attrs class ``section`` will be built
    with (for a role: its selected backend's config class). Only the preset
    keys that class has are applied (:func:`keys_for`); a section whose class is
    unknown (``None``) takes the preset as is, and the config's own validation
    reports what is wrong with it.
    """
    if not uses_default_task(data):
        return dict(data)
    merged = deep_merge(task_preset or {}, preset)
    applied: dict[str, Any] = {}
    for section, values in merged.items():
        cls = section_class(section)
        if cls is not None and isinstance(values, Mapping) and attrs.has(cls):
            values = keys_for(cls, values)
            if not values:
                continue
        applied[section] = values
    return resolve_deferred(deep_merge(applied, data))


def resolve_deferred(values: Any) -> Any:
    """``values`` with every zero-argument callable leaf replaced by what it returns.

    A preset value may be a function, called only when the preset applies and
    the user has not set that key: e.g. the path of a model the plugin builds
    (and caches) on first use, which a static mapping cannot name.
    """
    if isinstance(values, Mapping):
        return {key: resolve_deferred(value) for key, value in values.items()}
    return values() if callable(values) else values
