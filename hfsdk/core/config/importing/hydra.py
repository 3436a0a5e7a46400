"""Hydra's side of verl's configs: ``defaults:`` lists composed, command-line overrides applied.

:func:`compose` reads a primary config from a config directory (verl's
``verl/trainer/config``: from ``--verl-config-dir`` or an installed verl) and
merges its defaults list the way Hydra 1.3 does: each entry
``group@package: option`` loads ``group/option.yaml`` at ``package`` (relative
to the including config's package), ``../group`` climbs a directory, a bare
name is a config of the including config's own group, nested defaults lists
are composed first, and ``_self_`` (the file's own keys; at the end when not
listed) sets the merge order. Sections merge key by key; a later value (or
list) replaces an earlier one.

:func:`apply_overrides` applies Hydra's override grammar: ``key=value``,
``+key=value`` (add), ``++key=value`` (add or replace) and ``~key`` (delete).
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hfsdk.core.errors import ConfigError


def merge(base: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """``other`` merged into ``base`` in place (as OmegaConf: sections deep, the rest replaced)."""
    for key, value in other.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def nest(package: tuple[str, ...], tree: Mapping[str, Any]) -> dict[str, Any]:
    """``tree`` placed under the dotted ``package``."""
    out: Any = dict(tree)
    for part in reversed(package):
        out = {part: out}
    return out


def installed_config_dir() -> Path | None:
    """``verl/trainer/config`` of an importable verl, if there is one (nothing is imported)."""
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "trainer" / "config"
        if candidate.is_dir():
            return candidate
    return None


def _read(roots: tuple[Path, ...], rel: str) -> tuple[dict[str, Any], str | None]:
    """The config ``rel`` from the first of ``roots`` that has it (Hydra's search path)."""
    found = [root / f"{rel}.yaml" for root in roots if (root / f"{rel}.yaml").is_file()]
    if not found:
        where = ", ".join(str(root) for root in roots)
        raise ConfigError(
            f"verl config {rel + '.yaml'!r} is not in {where}; pass --verl-config-dir with the "
            "directory that holds it (verl's own trainer/config is searched after it)"
        )
    path = found[0]
    text = path.read_text()
    package = None
    for line in text.splitlines()[:5]:
        if line.startswith("# @package"):
            package = line.removeprefix("# @package").strip()
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"verl config {str(path)!r} is not a mapping")
    return data, package


def _entry(entry: Any) -> tuple[str, str | None, str | None] | None:
    """``(group or config name, package, option)`` of one defaults-list entry."""
    if isinstance(entry, str):
        name, _, package = entry.partition("@")
        return name.strip(), package.strip() or None, None
    if isinstance(entry, Mapping) and len(entry) == 1:
        ((key, option),) = entry.items()
        key = str(key)
        for word in ("optional ", "override "):
            key = key.removeprefix(word)
        group, _, package = key.partition("@")
        if option is None:
            return None  # a group left unset
        return group.strip(), package.strip() or None, str(option)
    raise ConfigError(f"defaults-list entry {entry!r} is not one Hydra accepts")


def _package(parent: tuple[str, ...], name: str, explicit: str | None) -> tuple[str, ...]:
    """The package of an entry: ``@package`` relative to the parent's, else the group's name."""
    if explicit is None:
        return (*parent, name.rstrip("/").split("/")[-1])
    if explicit == "_global_":
        return ()
    if explicit == "_here_":
        return parent
    if explicit.startswith("_global_."):
        return tuple(explicit.removeprefix("_global_.").split("."))
    return (*parent, *explicit.split("."))


def _group_dir(current: str, group: str) -> str:
    if group.startswith("/"):
        return group.strip("/")
    parts = [p for p in current.split("/") if p]
    for piece in group.split("/"):
        if piece == "..":
            if parts:
                parts.pop()
        elif piece:
            parts.append(piece)
    return "/".join(parts)


def _compose_file(
    root: tuple[Path, ...],
    group_dir: str,
    name: str,
    package: tuple[str, ...],
    seen: tuple[str, ...],
) -> dict[str, Any]:
    rel = f"{group_dir}/{name}" if group_dir else name
    if rel in seen:
        raise ConfigError(f"verl config {rel!r} includes itself through its defaults list")
    data, header = _read(root, rel.removesuffix(".yaml"))
    data.pop("hydra", None)  # Hydra's own settings (search path, job): not the run's
    if header == "_global_":
        package = ()
    return _compose_entries(root, group_dir, data, package, (*seen, rel))


def _compose_entries(
    root: tuple[Path, ...],
    group_dir: str,
    data: Mapping[str, Any],
    package: tuple[str, ...],
    seen: tuple[str, ...],
) -> dict[str, Any]:
    body = dict(data)
    entries = list(body.pop("defaults", None) or [])
    if "_self_" not in entries:
        entries.append("_self_")
    out: dict[str, Any] = {}
    for entry in entries:
        if entry == "_self_":
            merge(out, nest(package, body))
            continue
        parsed = _entry(entry)
        if parsed is None:
            continue
        target, explicit, option = parsed
        if option is None:  # a config, not a group: a file of this config's own group
            directory = _group_dir(group_dir, target.rpartition("/")[0])
            base = target.rpartition("/")[2]
            child = package if explicit is None else _package(package, base, explicit)
            merge(out, _compose_file(root, directory, base, child, seen))
        else:
            directory = _group_dir(group_dir, target)
            child = _package(package, target, explicit)
            merge(out, _compose_file(root, directory, option, child, seen))
    return out


def compose(config_dir: str | Path | list[Path], config_name: str) -> dict[str, Any]:
    """The config ``config_name`` of ``config_dir`` (or the first of several) composed."""
    return _compose_file(_roots(config_dir), "", config_name.removesuffix(".yaml"), (), ())


def compose_data(data: Mapping[str, Any], config_dir: str | Path | list[Path]) -> dict[str, Any]:
    """A primary config given as data (a user's YAML) composed against ``config_dir``."""
    body = {k: v for k, v in data.items() if k != "hydra"}
    return _compose_entries(_roots(config_dir), "", body, (), ())


def _roots(config_dir: str | Path | list[Path]) -> tuple[Path, ...]:
    dirs = config_dir if isinstance(config_dir, list) else [Path(config_dir)]
    roots = tuple(Path(d).expanduser() for d in dirs)
    for root in roots:
        if not root.is_dir():
            raise ConfigError(
                f"--verl-config-dir {str(root)!r} is not a directory; point it at verl's "
                "trainer/config directory (or the one holding your --config-name)"
            )
    return roots


def _parse_value(raw: str) -> Any:
    """An override's value: YAML (lists, null, booleans, numbers); interpolations stay text."""
    from hfsdk.core.config.importing.interpolation import parse_literal

    if "${" in raw:  # resolved later, against the whole composed config
        return raw.strip().strip("'\"") if raw.strip()[:1] in "'\"" else raw
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        return parse_literal(raw)
    return value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A copy of ``data`` with Hydra overrides (``k=v``, ``+k=v``, ``++k=v``, ``~k``) applied."""
    result = copy.deepcopy(data)
    for text in overrides:
        delete = text.startswith("~")
        body = text.lstrip("+~")
        key, sep, raw = body.partition("=")
        key = key.strip()
        if not key or (not sep and not delete) or any(not p for p in key.split(".")):
            raise ConfigError(
                f"override {text!r} is not of the form key.sub=value; e.g. "
                "actor_rollout_ref.actor.optim.lr=1e-6"
            )
        parts = key.split(".")
        node = result
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                if delete:
                    break
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(parts[: depth + 1])
                raise ConfigError(
                    f"override {text!r}: {where!r} is a value ({child!r}), not a section"
                )
            node = child
        else:
            if delete:
                node.pop(parts[-1], None)
            else:
                node[parts[-1]] = _parse_value(raw)
    return result
