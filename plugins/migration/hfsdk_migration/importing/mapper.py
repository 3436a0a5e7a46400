"""Bookkeeping shared by the config importers: flat source keys in, nested hfsdk keys out."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

import attrs

from hfsdk import ConfigError


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
    groups: dict[str, tuple[int, str]] = attrs.field(factory=dict)
    unset_rejected: dict[str, str] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)
    asked: set[str] = attrs.field(factory=set)
    """Every key the importer looked at: the keys it knows (:meth:`check_unknown`)."""
    flags: bool = False
    """Whether the source's keys are its ``--flags`` (TRL, OpenRLHF): a numeric key given
    without its value is then refused naming ``--key``, as the user wrote it."""

    def has(self, key: str) -> bool:
        """Whether the source sets ``key`` to something other than ``None``."""
        self.asked.add(key)
        return self.flat.get(key) is not None

    def get(self, key: str, default: Any = None, *, source_default: bool = False) -> Any:
        """The source value of ``key`` (marked as mapped), else ``default``.

        With ``source_default`` a missing key's ``default`` is the source
        project's own default, recorded so the output can say it was assumed.
        """
        self.asked.add(key)
        if key in self.flat:
            self.used.add(key)
        value = self.flat.get(key)
        if value is None:
            assumed = f"{key}={default!r}"
            if source_default and default is not None and assumed not in self.defaults_used:
                self.defaults_used.append(assumed)
            return default
        return value

    def int(self, key: str, default: Any = None, *, source_default: bool = False) -> Any:
        """:meth:`get` as an integer (an error names ``key``); ``default`` when unset."""
        value = self.get(key, default, source_default=source_default)
        return None if value is None else as_int(key, value, flag=self.flags)

    def num(self, key: str, default: Any = None, *, source_default: bool = False) -> Any:
        """:meth:`get` as a float (an error names ``key``); ``default`` when unset."""
        value = self.get(key, default, source_default=source_default)
        return None if value is None else as_number(key, value, flag=self.flags)

    def numbers(
        self, key: str, count: int, default: Any = None, *, source_default: bool = False
    ) -> Any:
        """:meth:`get` as a list of ``count`` floats (an error names ``key``); ``default``
        when unset."""
        value = self.get(key, default, source_default=source_default)
        return None if value is None else as_numbers(key, value, count, flag=self.flags)

    def put(self, dest: str, value: Any) -> None:
        """Set the hfsdk key ``dest`` (dotted) in the output."""
        node = self.out
        parts = dest.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value

    def reject(self, key: str, reason: str) -> None:
        """Report ``key`` as unmapped with a reason (it has no faithful counterpart)."""
        self.asked.add(key)
        if key in self.flat:
            self.used.discard(key)
            self.reasons[key] = reason

    def reject_default(self, key: str, default: Any, reason: str) -> None:
        """Report the source's ``default`` for an unset ``key`` as unmapped, with a reason.

        The source would apply ``default``; hfsdk has no counterpart, so the run differs
        even though the user wrote nothing.
        """
        self.asked.add(key)
        if not self.has(key):
            self.unset_rejected[key] = f"{key} = {default!r} (unset: the default)  ({reason})"

    def note(self, text: str) -> None:
        """Record an approximation made while mapping (printed as a warning and in the header)."""
        if text not in self.notes:
            self.notes.append(text)

    def consume(self, prefix: str) -> None:
        """Take every key under ``prefix`` as mapped (a section that has nothing to map)."""
        for key in self.keys(prefix):
            self.used.add(key)

    def group(self, prefix: str, reason: str) -> None:
        """Report every set key under ``prefix`` as one unmapped line with ``reason``."""
        keys = [k for k in self.keys(prefix) if k not in self.reasons and k not in self.used]
        count = sum(1 for k in keys if self.flat[k] is not None and not k.endswith("_target_"))
        for key in keys:
            self.used.add(key)
        if count:
            self.groups[prefix] = (count, reason)

    def keys(self, prefix: str) -> list[str]:
        """The source keys under ``prefix`` (``a.b.`` style) or equal to it."""
        return [k for k in self.flat if k.startswith(prefix) or k == prefix.rstrip(".")]

    def check_unknown(
        self,
        source: str,
        unmapped: Collection[str],
        conditional: Collection[str],
        unknown_reason: str,
    ) -> None:
        """Give every key left unmapped its reason, a likely misspelling its suggestion.

        ``unmapped`` are real ``source`` keys with no hfsdk counterpart; ``conditional``
        the keys the importer reads only with another setting (``use_vllm``'s, the other
        algorithm's), which this config's path may not have read. A key in none of them and
        not read is listed with ``unknown_reason`` and, when close to a key that is, the
        key it may have meant (whose source default the import keeps).
        """
        names = sorted(self.asked | set(unmapped) | set(conditional))
        for key, value in self.flat.items():
            if value is None or key in self.used or key in self.reasons:
                continue
            if key.endswith("_target_") or key == "defaults" or key.startswith("defaults."):
                continue
            if key in self.asked or key in conditional:
                self.reasons[key] = "not used with the other settings given"
            elif key in unmapped:
                self.reasons[key] = "no hfsdk counterpart"
            else:
                close = difflib.get_close_matches(key, names, n=1, cutoff=0.85)
                # Listed, not refused: the importer's lists of the source's keys cannot be
                # complete for every version, and a real key must never stop an import.
                hint = f"; did you mean {close[0]!r}? {source}'s default is kept" if close else ""
                self.reasons[key] = unknown_reason + hint

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
        lines.extend(self.unset_rejected.values())
        for prefix, (count, reason) in self.groups.items():
            lines.append(f"{prefix}* ({count} key{'s' if count > 1 else ''})  ({reason})")
        return lines


def _refuse_unset(key: str, value: Any, what: str, *, flag: bool, example: str = "N") -> None:
    """Refuse a numeric ``value`` that is a boolean or empty: a value-taking flag given bare.

    A bare ``--key`` reads as True (the store-true flags' value) and ``--key=`` as empty;
    ``float(True)`` is 1.0, so without this ``--learning_rate --num_generations 8`` would
    import as an LR of 1.0. With ``flag`` (TRL's and OpenRLHF's keys are their
    ``--flags``) the error names ``--key``; else ``key`` as written in a verl config.
    """
    if isinstance(value, bool):
        word = str(value).lower()
        if flag:
            raise ConfigError(
                f"--{key} needs a value (got a bare flag, or {word} in the config file); "
                f"give it {what}: --{key} {example}"
            )
        raise ConfigError(
            f"{key}={value!r} is not a number (a boolean); give it {what}: {key}={example}"
        )
    if isinstance(value, str) and not value.strip():
        shown = f"--{key}" if flag else key
        given = f"--{key} {example}" if flag else f"{key}={example}"
        raise ConfigError(f"{shown} needs a value (got an empty one); give it {what}: {given}")


def as_number(key: str, value: Any, *, flag: bool = False) -> float:
    """A numeric source value (YAML may give ``'1e-6'`` as a string).

    A boolean or empty value is refused (:func:`_refuse_unset`; ``flag``: name ``--key``).
    """
    _refuse_unset(key, value, "a number", flag=flag)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not a number") from None


def as_int(key: str, value: Any, *, flag: bool = False) -> int:
    """An integer source value; a boolean or empty one is refused as in :func:`as_number`."""
    _refuse_unset(key, value, "an integer", flag=flag)
    number = as_number(key, value, flag=flag)
    if not number.is_integer():
        raise ConfigError(f"{key}={value!r} is not an integer")
    return int(number)


def as_strings(key: str, value: Any, expected: str, hint: str) -> list[str]:
    """A source value that is one string or a list of them (``train_files``, ``logger``),
    as a list; anything else is refused naming ``expected`` and what to give (``hint``)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{key}={value!r}: expected {expected}; {hint}")


def as_numbers(key: str, value: Any, count: int, *, flag: bool = False) -> list[float]:
    """A source list of exactly ``count`` numbers (``betas: [0.9, 0.999]``); a boolean or
    empty value is refused as in :func:`as_number`."""
    _refuse_unset(key, value, f"{count} numbers", flag=flag, example=" ".join(["N"] * count))
    if not isinstance(value, list | tuple) or len(value) != count:
        raise ConfigError(f"{key}={value!r} is not a list of {count} numbers; give {count} numbers")
    return [as_number(key, item) for item in value]


LORA_REGEX = (
    "peft reads one string as a regular expression over full module names; hfsdk takes a "
    "list of module names or ['all-linear']: set actor.lora.target_modules"
)
"""Why a source's LoRA ``target_modules`` that is a pattern is listed rather than mapped."""


def lora_targets(key: str, value: Any) -> list[str] | None:
    """A source's LoRA ``target_modules`` as hfsdk's ``actor.lora.target_modules`` list.

    verl, TRL and OpenRLHF hand it to peft, which takes a list of module names or one
    string: ``all-linear`` (hfsdk's ``['all-linear']``), else a regular expression. A string
    that is a plain module name is that name; ``None`` for any other pattern (the caller
    lists it with :data:`LORA_REGEX`). A value that is neither is refused naming ``key``.
    """
    if isinstance(value, str):
        plain = value == "all-linear" or value.replace("_", "").isalnum()
        return [value] if plain else None
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    raise ConfigError(
        f"{key}={value!r}: expected a list of module names or 'all-linear' (peft's "
        "target_modules); give e.g. [q_proj, v_proj]"
    )
