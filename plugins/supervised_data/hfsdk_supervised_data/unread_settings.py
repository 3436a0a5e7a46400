"""The shared RL settings an algorithm that trains on given responses never reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


def unread_setting_problems(algo: Any, name: str, unread: Mapping[str, str]) -> list[str]:
    """One line per key of ``unread`` (key → why algorithm ``name`` never reads it) that the
    algorithm config ``algo`` sets to anything but its default: dropped silently, it would
    do nothing."""
    fields = attrs.fields_dict(type(algo))
    problems = []
    for key, why in unread.items():
        value, default = getattr(algo, key), fields[key].default
        if value != default:
            problems.append(
                f"algorithm.{key}={value!r}: algorithm {name!r} never reads it ({why}), so this "
                f"setting would do nothing; remove it (default {default!r})"
            )
    return problems
