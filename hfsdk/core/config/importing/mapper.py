"""Bookkeeping shared by the config importers: flat source keys in, nested hfsdk keys out."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from hfsdk.core.errors import ConfigError

_INTERPOLATION = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists and scalars are leaves)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{dotted}."))
        else:
            out[dotted] = value
    return out


def resolve_interpolations(flat: dict[str, Any]) -> dict[str, Any]:
    """Replace Hydra-style ``${a.b}`` values with the value of key ``a.b`` of the same file.

    Other interpolations (``${oc.env:X}``, string templates) stay as they are
    and end up among the unmapped keys.
    """
    resolved = dict(flat)
    for _ in range(8):  # chains of references, bounded
        changed = False
        for key, value in resolved.items():
            match = _INTERPOLATION.match(value) if isinstance(value, str) else None
            if match and match.group(1) in resolved and match.group(1) != key:
                resolved[key] = resolved[match.group(1)]
                changed = True
        if not changed:
            break
    return resolved


@attrs.define
class Mapper:
    """Reads source keys (marking them used) and writes hfsdk keys.

    Keys whose value is ``None`` (unset) are not reported; ``_target_`` and
    Hydra ``defaults`` entries are structure, not settings, and are ignored.
    """

    flat: dict[str, Any]
    used: set[str] = attrs.field(factory=set)
    out: dict[str, Any] = attrs.field(factory=dict)
    reasons: dict[str, str] = attrs.field(factory=dict)
    defaults_used: list[str] = attrs.field(factory=list)

    def has(self, key: str) -> bool:
        """Whether the source sets ``key`` to something other than ``None``."""
        return self.flat.get(key) is not None

    def get(self, key: str, default: Any = None, *, source_default: bool = False) -> Any:
        """The source value of ``key`` (marked as mapped), else ``default``.

        With ``source_default`` a missing key's ``default`` is the source
        project's own default, recorded so the output can say it was assumed.
        """
        if key in self.flat:
            self.used.add(key)
        value = self.flat.get(key)
        if value is None:
            if source_default and default is not None:
                self.defaults_used.append(f"{key}={default!r}")
            return default
        return value

    def int(self, key: str, default: Any = None, *, source_default: bool = False) -> Any:
        """:meth:`get` as an integer (an error names ``key``); ``default`` when unset."""
        value = self.get(key, default, source_default=source_default)
        return None if value is None else as_int(key, value)

    def num(self, key: str, default: Any = None, *, source_default: bool = False) -> Any:
        """:meth:`get` as a float (an error names ``key``); ``default`` when unset."""
        value = self.get(key, default, source_default=source_default)
        return None if value is None else as_number(key, value)

    def put(self, dest: str, value: Any) -> None:
        """Set the hfsdk key ``dest`` (dotted) in the output."""
        node = self.out
        parts = dest.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value

    def reject(self, key: str, reason: str) -> None:
        """Report ``key`` as unmapped with a reason (it has no faithful counterpart)."""
        if key in self.flat:
            self.used.discard(key)
            self.reasons[key] = reason

    def unmapped(self) -> list[str]:
        """One line per source key that was not mapped: ``key = value`` and the reason if any."""
        lines = []
        for key, value in self.flat.items():
            if key in self.used or value is None or key.endswith("_target_"):
                continue
            if key == "defaults" or key.startswith("defaults."):
                continue
            reason = self.reasons.get(key)
            lines.append(f"{key} = {value!r}" + (f"  ({reason})" if reason else ""))
        return lines


def as_number(key: str, value: Any) -> float:
    """A numeric source value (YAML may give ``'1e-6'`` as a string)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not a number") from None


def as_int(key: str, value: Any) -> int:
    """An integer source value."""
    number = as_number(key, value)
    if not number.is_integer():
        raise ConfigError(f"{key}={value!r} is not an integer")
    return int(number)
