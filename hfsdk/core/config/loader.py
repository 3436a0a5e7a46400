"""Reading a YAML config file and applying dotted command-line overrides."""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from hfsdk.core.config.safe_yaml import load_yaml_text, read_config_text
from hfsdk.core.errors import ConfigError


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping from ``path``; a missing file or non-mapping is a ConfigError."""
    path = Path(path)
    text = read_config_text(path)
    try:
        data = load_yaml_text(text, source=f"config file {str(path)!r}")
    except yaml.YAMLError as exc:  # (folded: its line and column are on a later line)
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {_one_line(exc)}") from exc
    if not isinstance(data, dict | None):
        raise ConfigError(
            f"config file {str(path)!r} must hold a mapping of sections, got {type(data).__name__}"
        )
    # A section left empty (`actor:`, only comments) sets nothing: null must not hide presets.
    return {key: value for key, value in (data or {}).items() if value is not None}


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def parse_override(text: str) -> tuple[list[str], Any]:
    """``actor.optim.lr=1e-6`` -> (["actor", "optim", "lr"], 1e-06). Values are YAML; the old
    ``trainer.wandb`` is ``wandb`` (see ``with_wandb_moved``: so a later layer's key wins)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(
            f"override {text!r} is not of the form key.sub=value; e.g. actor.optim.lr=1e-6"
        )
    try:
        value = load_yaml_text(raw, source=f"override {key!r}")  # `key=` is YAML's null
    except yaml.YAMLError as exc:
        why = f"is not valid YAML ({_one_line(exc)}){shell_split_hint(raw)}"
        raise ConfigError(f"override {text!r}: value {raw!r} {why}") from exc
    if re.search(r"(^|\s)#", raw):  # YAML drops a comment silently: the value cut, or null
        node = yaml.compose(raw, Loader=yaml.SafeLoader)  # a '#' past the value's end is one
        if re.search(r"(^|\s)#", raw[node.end_mark.index if node else 0 :]):
            quoted = shlex.quote(json.dumps(raw.strip(), ensure_ascii=False))
            raise ConfigError(
                f"override {text!r}: YAML reads '#' as a comment, so the value would be "
                f"{'null' if value is None else repr(value)}; quote it: {key}={quoted}"
            )
    keys = key.split(".")
    return keys[1:] if keys[:2] == ["trainer", "wandb"] else keys, value


def shell_split_hint(value: str) -> str:
    """A quoting hint if ``value`` opens a ``[`` or ``{`` it does not close, else ``""``."""
    # An unquoted `key=[a, b]` reaches us as `key=[a,` and `b]`: the shell split it at the space.
    if value.count("[") <= value.count("]") and value.count("{") <= value.count("}"):
        return ""
    return "; it looks split by the shell at a space: quote the whole override ('key=[a, b]')"


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """A copy of ``data`` with each ``key.sub=value`` override applied in order."""
    result = copy.deepcopy(data)
    for text in overrides:
        keys, value = parse_override(text)
        node = result
        for depth, key in enumerate(keys[:-1]):
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            if not isinstance(child, dict):
                where = ".".join(keys[: depth + 1])
                raise ConfigError(
                    f"override {text!r}: {where!r} is a value ({child!r}), not a section; "
                    f"set {where}=... instead"
                )
            node = child
        node[keys[-1]] = value
    return result
