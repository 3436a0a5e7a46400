"""YAML loading that refuses alias bombs ("billion laughs") and absurd nesting in one line.

PyYAML's ``safe_load`` builds an alias as a shared reference, so nine nested
levels of ten aliases each load in microseconds as a graph of 10^9 leaves — and
then hang whatever walks it (a deep copy, a merge, ``repr`` in an error message:
522 MB on one line). :func:`load_yaml_text` composes the document, counts the
nodes it would have with every alias expanded (linear in its distinct nodes,
memoised per node) and refuses past :data:`MAX_EXPANDED_NODES`, a recursive
alias, or nesting deeper than :data:`MAX_DEPTH`, before anything is built; a
key twice in one mapping (YAML keeps the last, silently) is refused too. Every
place hfsdk reads YAML goes through it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hfsdk.core.errors import ConfigError

MAX_EXPANDED_NODES = 1_000_000
"""Nodes a document may hold with its aliases expanded (a large config has a few thousand)."""

MAX_DEPTH = 200
"""Deepest nesting of mappings and lists a document may have."""


class YamlBombError(ConfigError):
    """A YAML document over the alias-expansion, node or depth bounds (``str()`` is one line)."""


def _expanded_nodes(root: yaml.Node, source: str) -> int:
    """Nodes under ``root`` with every alias expanded; refuses past the bounds."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(sizes[id(child)] for child in _children(node))
            if total > MAX_EXPANDED_NODES:
                raise YamlBombError(
                    f"{source}: YAML aliases expand to more than {MAX_EXPANDED_NODES:,} nodes "
                    "(an alias bomb?); write the values out or use fewer nested aliases"
                )
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlBombError(
                f"{source}: a YAML alias refers to a node that contains it (a recursive "
                "structure); a config must be a tree of values"
            )
        if depth > MAX_DEPTH:
            raise YamlBombError(
                f"{source}: YAML nested more than {MAX_DEPTH} levels deep; flatten the document"
            )
        children = _children(node)
        if not children:
            sizes[key] = 1
            continue
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that checks each composed document against the bounds first."""

    source = "YAML"

    def construct_document(self, node: yaml.Node) -> Any:
        _expanded_nodes(node, self.source)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: set[tuple[str, str]] = set()  # YAML would keep the last of two equal keys
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                if (key.tag, key.value) in seen:
                    line = key.start_mark.line + 1
                    raise ConfigError(f"{self.source}: the key {key.value!r} appears twice in one "
                                      f"mapping (line {line}); keep one")  # fmt: skip
                seen.add((key.tag, key.value))
        return super().construct_mapping(node, deep=deep)


def load_yaml_text(text: str, *, source: str = "YAML") -> Any:
    """``yaml.safe_load(text)`` within the bounds; ``source`` names the input in errors.

    Raises :class:`YamlBombError` (a :class:`ConfigError`) past the bounds and
    ``yaml.YAMLError`` for text that is not YAML, as ``safe_load`` does.
    """
    loader = _BoundedLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except RecursionError:
        raise YamlBombError(
            f"{source}: YAML nested too deeply to read; flatten the document"
        ) from None
    finally:
        loader.dispose()


def read_config_text(path: Path, *, shown: str | None = None, directory_hint: str = "") -> str:
    """The text of the config file ``path``, or one line on why it is not one.

    A directory, a missing file and a binary file (a NUL byte or bytes that are
    not UTF-8) are :class:`ConfigError`; ``shown`` is how the path is named.
    """
    name = repr(shown if shown is not None else str(path))
    if path.is_dir():
        hint = f" ({directory_hint})" if directory_hint else ""
        raise ConfigError(f"config file {name} is a directory; pass a file in it{hint}")
    if not path.exists():
        raise ConfigError(f"config file {name} does not exist; pass an existing file")
    with path.open("rb") as handle:  # a pipe too (`--config <(...)`), bounded (/dev/zero)
        data = handle.read((16 << 20) + 1)
    if len(data) > 16 << 20:
        raise ConfigError(f"config file {name} is over 16 MiB; pass a config")
    bad = data.find(b"\0")  # NUL is valid UTF-8 but never in a config or a script
    if bad < 0:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = exc.start
    raise ConfigError(
        f"config file {name} is not a text file (byte {bad} is binary, not UTF-8 text); "
        "pass a YAML/JSON config or a launch script"
    )
