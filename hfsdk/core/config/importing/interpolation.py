"""OmegaConf interpolations in an imported config, resolved with OmegaConf's semantics.

verl's YAML files are OmegaConf configs: ``${a.b}`` (a node of the same
config), ``${.x}`` / ``${..x}`` (relative to the node that holds the value),
``${oc.select:a.b,default}``, ``${oc.env:VAR,default}``, ``${oc.decode:...}``,
strings with interpolations inside (``checkpoints/${trainer.project_name}``)
and ``???`` (a mandatory value not given). omegaconf is not an hfsdk
dependency, so this module implements the subset verl uses, as OmegaConf
defines it:

- a value that is exactly one interpolation takes the referenced value with
  its type; interpolations inside a longer string are rendered with ``str``;
- ``oc.select`` gives the default (``None`` without one) when the key does not
  exist or is ``???``; ``oc.env`` gives the variable as a string, else the
  default as a string (``null`` stays ``None``), else it is an error;
- resolver arguments are OmegaConf literals: ``null``, booleans, numbers,
  quoted strings, ``[...]`` / ``{...}``, otherwise the stripped text;
- ``\\${`` is a literal ``${``.

What cannot be resolved (an unknown resolver, a missing key, a cycle) stays
as written and is reported once in :attr:`Resolver.problems`, so the key ends
up listed by the importer instead of stopping it.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from typing import Any

import yaml

MISSING = "???"
_RESOLVER = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*:(.*)$", re.DOTALL)
_INT = re.compile(r"^[-+]?\d[\d_]*$")
_FLOAT = re.compile(r"^[-+]?(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$", re.I)


class _Unresolved(Exception):
    """An interpolation that cannot be resolved (the message says why)."""


def _closing(text: str, start: int) -> int:
    """Index of the ``}`` closing the ``${`` at ``start`` (nesting and quotes respected)."""
    depth, i, quote = 0, start, None
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in "'\"" and depth > 0:
            quote = char
        elif text.startswith("${", i):
            depth += 1
            i += 1
        elif char == "{" and depth > 0:
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise _Unresolved(f"unclosed interpolation in {text!r}")


def _split_args(text: str) -> list[str]:
    """Split resolver arguments at top-level commas."""
    args, depth, quote, current = [], 0, None, []
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and i + 1 < len(text):
                current.append(char)
                i += 1
                char = text[i]
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            args.append("".join(current))
            current = []
            i += 1
            continue
        current.append(char)
        i += 1
    args.append("".join(current))
    return args


def parse_literal(text: str) -> Any:
    """An OmegaConf grammar literal: null, bool, int, float, quoted string, list/dict, or text."""
    text = text.strip()
    lowered = text.lower()
    if lowered in ("null", "~"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INT.match(text):
        return int(text.replace("_", ""))
    if _FLOAT.match(text):
        return float(text.replace("_", ""))
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].replace(f"\\{text[0]}", text[0])
    if text[:1] in "[{":
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return text
    return text


class Resolver:
    """Resolves every interpolation of one config tree (see the module docstring)."""

    def __init__(self, tree: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        self.tree = tree
        self.env = os.environ if env is None else env
        self.problems: list[str] = []
        self._active: set[tuple[str, ...]] = set()

    # -- the tree --------------------------------------------------------------------------

    def _raw(self, path: tuple[str, ...]) -> Any:
        node: Any = self.tree
        for part in path:
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise KeyError(".".join(path))
        return node

    def _target(self, ref: str, where: tuple[str, ...]) -> tuple[str, ...]:
        """The absolute path of ``ref`` as written in a value at ``where`` (a key path)."""
        ref = ref.strip()
        if not ref.startswith("."):
            return tuple(p for p in ref.split(".") if p)
        dots = len(ref) - len(ref.lstrip("."))
        base = where[:-1]  # the node holding the value; one more dot is one level up
        if dots - 1 > len(base):
            raise _Unresolved(f"${{{ref}}} goes above the root")
        base = base[: len(base) - (dots - 1)]
        rest = ref[dots:]
        return base + tuple(p for p in rest.split(".") if p)

    def value(self, path: tuple[str, ...]) -> Any:
        """The resolved value at ``path`` (a copy for sections)."""
        if path in self._active:
            raise _Unresolved(f"${{{'.'.join(path)}}} is part of a cycle of references")
        self._active.add(path)
        try:
            raw = self._raw(path)
            return self._resolve_node(raw, path)
        finally:
            self._active.discard(path)

    def _resolve_node(self, raw: Any, path: tuple[str, ...]) -> Any:
        if isinstance(raw, Mapping):
            return {k: self._resolve_node(v, (*path, str(k))) for k, v in raw.items()}
        if isinstance(raw, list):
            return [self._resolve_node(v, (*path, str(i))) for i, v in enumerate(raw)]
        if isinstance(raw, str):
            if raw == MISSING:
                return MISSING
            if "${" in raw:
                return self._string(raw, path)
        return raw

    # -- strings ---------------------------------------------------------------------------

    def _string(self, text: str, where: tuple[str, ...]) -> Any:
        pieces: list[Any] = []
        i = 0
        while i < len(text):
            if text.startswith("\\${", i):
                pieces.append("${")
                i += 3
            elif text.startswith("${", i):
                end = _closing(text, i)
                pieces.append(_Value(self._interpolation(text[i + 2 : end], where)))
                i = end + 1
            else:
                j = i + 1
                while j < len(text) and not text.startswith("${", j) and text[j] != "\\":
                    j += 1
                pieces.append(text[i:j])
                i = j
        if len(pieces) == 1 and isinstance(pieces[0], _Value):
            return pieces[0].value
        return "".join(str(p.value) if isinstance(p, _Value) else p for p in pieces)

    def _interpolation(self, body: str, where: tuple[str, ...]) -> Any:
        match = _RESOLVER.match(body)
        if match is None:
            path = self._target(body, where)
            try:
                value = self.value(path)
            except KeyError:
                raise _Unresolved(f"${{{body}}}: no key {'.'.join(path)!r}") from None
            if value == MISSING:
                raise _Unresolved(f"${{{body}}} is ??? (a mandatory value not given)")
            return value
        name, rest = match.group(1), match.group(2)
        args = [self._arg(a, where) for a in _split_args(rest)] if rest.strip() else []
        return self._call(name, args, rest, where)

    def _arg(self, text: str, where: tuple[str, ...]) -> Any:
        text = text.strip()
        if "${" in text and not (text[:1] in "'\"" and text[-1:] == text[:1]):
            return self._string(text, where)
        return parse_literal(text)

    def _call(self, name: str, args: list[Any], raw: str, where: tuple[str, ...]) -> Any:
        if name == "oc.select":
            if not args or not isinstance(args[0], str):
                raise _Unresolved(f"${{oc.select:{raw}}} needs a key")
            default = args[1] if len(args) > 1 else None
            try:
                value = self.value(self._target(args[0], where))
            except KeyError:
                return default
            return default if value == MISSING else value
        if name == "oc.env":
            if not args:
                raise _Unresolved("${oc.env:} needs a variable name")
            variable = str(args[0])
            if variable in self.env:
                return self.env[variable]
            if len(args) > 1:
                return None if args[1] is None else str(args[1])
            raise _Unresolved(f"${{oc.env:{variable}}}: {variable} is not set and has no default")
        if name == "oc.decode":
            return parse_literal(str(args[0])) if args and args[0] is not None else None
        if name == "oc.deprecated":
            try:
                return self.value(self._target(str(args[0]), where))
            except KeyError:
                raise _Unresolved(f"${{oc.deprecated:{raw}}}: no such key") from None
        raise _Unresolved(f"${{{name}:...}} is a resolver hfsdk does not know")

    # -- the whole tree --------------------------------------------------------------------

    def resolve(self) -> dict[str, Any]:
        """A resolved copy of the whole tree; ``???`` values become ``None``."""
        return self._walk(copy.deepcopy(dict(self.tree)), ())

    def _walk(self, node: Any, path: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            return {k: self._walk(v, (*path, str(k))) for k, v in node.items()}
        if isinstance(node, list):
            return [self._walk(v, (*path, str(i))) for i, v in enumerate(node)]
        if isinstance(node, str) and node == MISSING:
            self.problems.append(f"{'.'.join(path)} is ??? (verl requires it; it was not given)")
            return None
        if isinstance(node, str) and "${" in node:
            try:
                value = self._string(node, path)
            except _Unresolved as exc:
                self.problems.append(f"{'.'.join(path)} = {node!r} left as written: {exc}")
                return node
            return None if value == MISSING else value
        return node


class _Value:
    """An interpolation's value inside a string being assembled."""

    def __init__(self, value: Any) -> None:
        self.value = value


def resolve_tree(
    tree: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """``tree`` with every interpolation resolved, and the problems found (one line each)."""
    resolver = Resolver(tree, env)
    return resolver.resolve(), resolver.problems
