"""Structuring plain dicts (from YAML and overrides) into attrs config classes.

cattrs does the structuring; this module makes it strict (no silent
``1.5 -> 1`` or ``3 -> "3"``) and turns its exception trees into one-line
messages that name the key, the bad value and what is allowed."""

from __future__ import annotations

import contextlib
import math
import re
import typing
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from hfsdk.core.config.help import SUBSECTIONS_KEY
from hfsdk.core.errors import ConfigError
from hfsdk.core.registry import closest_match


def _structure_int(value: Any, _type: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"expected an integer, got {value!r}")
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise TypeError(f"expected an integer, got {value!r}") from None
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


def _structure_float(value: Any, _type: type) -> float:
    if isinstance(value, bool):
        raise TypeError(f"expected a number, got {value!r}")
    number: float | None = None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        # YAML 1.1 reads "1e-6" as a string; accept numeric strings.
        with contextlib.suppress(ValueError):
            number = float(value)
    if number is None:
        raise TypeError(f"expected a number, got {value!r}")
    if not math.isfinite(number):
        # inf/nan pass every range check (nan compares false) and poison training later.
        raise TypeError(f"expected a finite number, got {value!r}")
    return number


def _structure_str_tuple(value: Any, _type: type) -> tuple[str, ...]:
    # One path given as a plain string is one path, not a tuple of its characters.
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list of strings, got {value!r}")
    return tuple(_structure_str(item, str) for item in value)


def _structure_bool(value: Any, _type: type) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "on", "off"):
        return value.lower() in ("true", "yes", "on")
    raise TypeError(f"expected true or false, got {value!r}")


def _structure_str(value: Any, _type: type) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        # YAML read the text as a number (0755 -> 493, 12:30 -> 750): the text meant is lost.
        raise TypeError(f"expected a string, got the number {value!r}; quote the value")
    raise TypeError(f"expected a string, got {value!r}")


def make_converter() -> cattrs.Converter:
    """A strict converter: unknown keys are errors, scalars are not coerced loosely."""
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(typing.Any, lambda v, _t: v)
    converter.register_structure_hook_factory(_has_subsections, _structure_hosting)
    converter.register_unstructure_hook_factory(_has_subsections, _unstructure_hosting)
    str_tuple = lambda tp: tp == tuple[str, ...] or tp == typing.Tuple[str, ...]  # noqa: E731, UP006
    converter.register_structure_hook_func(str_tuple, _structure_str_tuple)
    items = converter.copy()  # A string for a list was one error per character: refuse it whole.
    converter.register_structure_hook_func(
        lambda tp: typing.get_origin(tp) in (list, tuple, Sequence),
        lambda v, tp: items.structure(_listed(v), tp),  # (its items: through the copy)
    )
    converter.register_structure_hook_func(str_tuple, _structure_str_tuple)  # (wins: later)
    return converter


def _listed(value: Any) -> Any:
    if isinstance(value, str | bytes | dict) or not isinstance(value, Iterable):
        raise TypeError(f"expected a list, in brackets ([a, b]), got {value!r}")
    return value


def _subsection_fields(cls: Any) -> list[str]:
    if not (isinstance(cls, type) and attrs.has(cls)):
        return []
    return [f.name for f in attrs.fields(cls) if f.metadata.get(SUBSECTIONS_KEY)]


def _has_subsections(cls: Any) -> bool:
    return bool(_subsection_fields(cls))


def _structure_hosting(cls: type, converter: cattrs.Converter) -> Any:
    """A section hosting plugins' sub-sections: its sub-section field is no key of its own
    (the composer fills it from ``section.<name>`` keys), so a config cannot set it."""
    from cattrs.gen import make_dict_structure_fn, override

    omitted = {name: override(omit=True) for name in _subsection_fields(cls)}
    return make_dict_structure_fn(cls, converter, **omitted)


def _unstructure_hosting(cls: type, converter: cattrs.Converter) -> Any:
    """Plain data of a hosting section: each sub-section back under its own name."""
    from cattrs.gen import make_dict_unstructure_fn, override

    fields = _subsection_fields(cls)
    base = make_dict_unstructure_fn(cls, converter, **{n: override(omit=True) for n in fields})

    def unstructure_hosting(value: Any) -> dict[str, Any]:
        out = base(value)
        for name in fields:
            for sub_name, sub in getattr(value, name).items():
                out[sub_name] = converter.unstructure(sub)
        return out

    return unstructure_hosting


_ATTRS_VALIDATOR_FIELD = re.compile(r"^'(?P<field>[A-Za-z_][A-Za-z0-9_]*)' (?P<rest>.*)$", re.S)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _describe_type(tp: Any) -> str:
    other = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(other) == 1 and type(None) in typing.get_args(tp):  # X | None
        return f"{_describe_type(other[0])}, or null"
    if typing.get_origin(tp) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


_KEY_SYNONYMS = {
    "learning_rate": "lr",
    "max_grad_norm": "grad_clip",
    "gradient_clip": "grad_clip",
    "clip_grad": "grad_clip",
    "warmup": "warmup_steps",
    "num_warmup_steps": "warmup_steps",
    "adam_betas": "betas",
    "adam_epsilon": "eps",
    "epsilon": "eps",
}
"""Other frameworks' names for a field whose hfsdk name spelling similarity cannot find."""


def closest_key(key: str, fields: list[str]) -> str | None:
    """The field a mistyped ``key`` most likely meant: a close spelling, a name other
    frameworks use (``learning_rate`` for ``lr``), or its initials (``lr``)."""
    synonym = _KEY_SYNONYMS.get(key)
    if synonym in fields:
        return synonym
    if close := closest_match(key, fields):
        return close
    initials = "".join(word[0] for word in key.split("_") if word)
    return initials if len(initials) > 1 and initials in fields else None


def _messages(exc: BaseException, path: str, cls: type | None) -> list[str]:
    if isinstance(exc, ForbiddenExtraKeysError):
        hosted = set(_subsection_fields(exc.cl))
        fields = (
            [f.name for f in attrs.fields(exc.cl) if f.name not in hosted]
            if attrs.has(exc.cl)
            else []
        )
        out = []
        for extra in sorted(map(str, exc.extra_fields)):  # (a YAML key may be a number)
            where = _join(path, extra)
            close = closest_key(extra, fields)
            hint = f"; did you mean {_join(path, close)!r}?" if close else ""
            allowed = ", ".join(fields) or "(none)"
            out.append(f"unknown config key {where!r}{hint} (allowed here: {allowed})")
        return out
    if isinstance(exc, ClassValidationError | IterableValidationError):
        # A class's errors carry their field (note.name), a list's their index (note.index).
        fields = isinstance(exc, ClassValidationError)
        with_notes, without = exc.group_exceptions()
        out = []
        for sub, note in with_notes:
            out.extend(_messages(sub, _join(path, note.name if fields else note.index), note.type))
        for sub in without:
            out.extend(_messages(sub, path, exc.cl if fields else None))
        return out
    text = str(exc)
    if cls is not None and attrs.has(cls) and text.endswith(("not iterable", "attribute 'keys'")):
        value = getattr(exc, "obj", None)  # a list's bare name: reward.functions=[exact_match]
        if path.endswith("]") and isinstance(value, str) and "name" in attrs.fields_dict(cls):
            return [f"config entry {path!r} is the string {value!r}, not a mapping; write it as "
                    f"{{name: {value}}}"]  # fmt: skip
        return [f"config section {path!r} must be a mapping of keys to values; leave it out "
                "to keep its defaults"]  # fmt: skip
    match = _ATTRS_VALIDATOR_FIELD.match(text)
    if match and cls is not None and attrs.has(cls):
        # An attrs validator failed inside __init__: it names the field itself.
        return [f"bad value for config key {_join(path, match['field'])!r}: {match['rest']}"]
    if "not in literal" in text and cls is not None:
        value = text.split(" not in literal")[0]
        return [f"bad value {value!r} for config key {path!r}; expected {_describe_type(cls)}"]
    if typing.get_origin(cls) is dict and text.endswith("attribute 'items'"):  # not Python's
        text = "expected a mapping {key: value}, got a " + text.split()[0].strip("'")
    expected = ""  # (a class's own check, in __attrs_post_init__, says what it expects)
    if cls is not None and not text.startswith("expected") and not attrs.has(cls):
        expected = f" (expected {_describe_type(cls)})"
    return [f"bad value for config key {path!r}: {text}{expected}"]


def structure(converter: cattrs.Converter, data: Any, cls: type, *, path: str = "") -> Any:
    """Structure ``data`` into ``cls`` or raise :class:`ConfigError` with every problem."""
    if not isinstance(data, dict):
        where = f"config section {path!r}" if path else "the config"
        raise ConfigError(f"{where} must be a mapping of keys to values, got {data!r}")
    try:
        return converter.structure(data, cls)
    except (ClassValidationError, ForbiddenExtraKeysError, IterableValidationError) as exc:
        messages = _messages(exc, path, cls)
        raise ConfigError("; ".join(messages)) from exc
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad value in config section {path or '(top level)'!r}: {exc}") from exc


def unstructure(converter: cattrs.Converter, obj: Any) -> Any:
    """Plain dicts/lists/scalars for YAML output (tuples become lists)."""
    return _plain(converter.unstructure(obj))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
