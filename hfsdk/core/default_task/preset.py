"""Settings under which the built-in default task learns within a short CPU run.

The generic config defaults suit real models; the default task's model is
tiny, so it needs a larger learning rate and short responses. When a run names
no training data (``data.train_files`` empty), the algorithm plugin's preset
(``AlgorithmSpec.preset``) on top of the core sections below is merged *under*
the user's config: anything the user sets still wins. ``hfsdk config show``
prints the result. The core knows no algorithm and no backend: settings of
backend sections (optimizer, batch sizes, response length) come from the
algorithm's preset, each section naming the backend it was written for.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

CORE_PRESET: dict[str, Any] = {
    "trainer": {"total_steps": 30},
    "data": {"batch_size": 16},
}
"""The default task's settings of the core's own sections, for every algorithm."""


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
    """Whether a raw config names no training data (so the default task runs)."""
    section = data.get("data") or {}
    return not (isinstance(section, Mapping) and section.get("train_files"))


def with_default_task_preset(
    preset: Mapping[str, Any],
    data: Mapping[str, Any],
    default_backend: Callable[[str], str | None] = lambda _section: None,
) -> dict[str, Any]:
    """``data`` on top of :data:`CORE_PRESET` and ``preset`` when it runs the default task.

    A preset section with a ``backend`` key (a name, or a list of the backends
    whose config classes share those keys) is kept only when the section
    resolves to one of them: the user's ``backend`` if given, else
    ``default_backend(section)``. The ``backend`` key itself is not forced on
    the user's config.
    """
    if not uses_default_task(data):
        return dict(data)
    merged = deep_merge(CORE_PRESET, preset)
    for section, values in list(merged.items()):
        if not (isinstance(values, Mapping) and "backend" in values):
            continue
        written_for = values["backend"]
        written_for = (written_for,) if isinstance(written_for, str) else tuple(written_for)
        given = data.get(section)
        chosen = given.get("backend") if isinstance(given, Mapping) else None
        if (chosen or default_backend(section)) not in written_for:
            merged.pop(section)
        else:
            merged[section] = {k: v for k, v in values.items() if k != "backend"}
    return deep_merge(merged, data)
