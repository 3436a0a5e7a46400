"""verl's configs composed by Hydra and resolved by OmegaConf, the libraries verl itself runs on.

:func:`compose` hands a primary config (a name in verl's ``trainer/config``, or
the user's own YAML) and the launch script's overrides to ``hydra.compose``:
the defaults list (with its interpolated options, ``${model_engine}_actor``),
the override grammar (``k=v``, ``+k=v``, ``++k=v``, ``~k``) and the refusal
of a key verl does not define are Hydra's. :func:`resolve` turns the result
into plain data with OmegaConf's interpolation semantics, key by key, so one
unresolvable value is reported instead of stopping the import.

Without verl's configs (no ``--verl-config-dir`` and no verl installed) the
base is hfsdk's copy of verl's defaults for the keys it maps
(:mod:`~hfsdk_migration.importing.verl_defaults`); overrides are then added
or replaced (``++``), since a misspelling cannot be told from a key hfsdk's
copy leaves out.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hfsdk import ConfigError

_SOURCE_NAME = "hfsdk_import_source"
"""The file name a user's own verl YAML is composed under (in a temporary directory)."""


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


def _check_dirs(dirs: list[Path]) -> list[Path]:
    out = []
    for given in dirs:
        path = Path(given).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(
                f"--verl-config-dir {str(given)!r} is not a directory; point it at verl's "
                "trainer/config directory (or the one holding your --config-name)"
            )
        out.append(path)
    return out


def compose(
    config_dirs: list[Path],
    config_name: str,
    overrides: list[str],
    *,
    primary: Mapping[str, Any] | None = None,
    fallback: Mapping[str, Any] | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """The composed config as plain data, interpolations still unresolved.

    ``primary``: the user's own YAML (composed against ``config_dirs`` when it
    has a defaults list); else ``config_name`` is looked up in ``config_dirs``.
    ``fallback``: the tree to start from when there are no ``config_dirs``.
    ``source``: the file ``primary`` was read from, as the user named it (for errors).
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    dirs = _check_dirs(config_dirs)
    overrides = list(overrides)
    with tempfile.TemporaryDirectory(prefix="hfsdk-verl-") as tmp:
        name = config_name
        if primary is not None or not dirs:
            tree = dict(primary or {})
            tree.pop("hydra", None)  # its search path names the source machine's directories
            if not dirs and fallback is not None:
                tree = _with_fallback(fallback, tree)
            if not dirs and fallback is not None:
                overrides = [_force(o) for o in overrides]
            name = _SOURCE_NAME
            (Path(tmp) / f"{name}.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
            roots = [Path(tmp), *dirs]
        else:
            roots = dirs
        if len(roots) > 1:
            paths = ",".join(f"'file://{root}'" for root in roots[1:])
            overrides.append(f"hydra.searchpath=[{paths}]")
        try:
            with initialize_config_dir(config_dir=str(roots[0]), version_base=None):
                cfg = hydra_compose(config_name=name, overrides=overrides)
        except Exception as exc:  # Hydra's and OmegaConf's errors share no base class
            # Without a defaults list Hydra composes the file alone, as verl's own
            # `--config-name` would: its errors then name the file, not verl's config.
            whole = None
            if primary is not None and "defaults" not in primary:
                whole = repr(source) if source else "the primary config"
            raise _one_line(exc, config_name, roots, overrides, whole=whole) from exc
        return OmegaConf.to_container(cfg, resolve=False)  # type: ignore[return-value]


def _with_fallback(fallback: Mapping[str, Any], tree: dict[str, Any]) -> dict[str, Any]:
    """``tree`` (without its defaults list) merged over hfsdk's copy of verl's defaults."""
    from omegaconf import OmegaConf

    body = {k: v for k, v in tree.items() if k != "defaults"}
    merged = OmegaConf.merge(OmegaConf.create(dict(fallback)), OmegaConf.create(body))
    return OmegaConf.to_container(merged, resolve=False)  # type: ignore[return-value]


def _force(override: str) -> str:
    """``k=v`` as ``++k=v``: on hfsdk's partial copy of verl's tree any key may be new."""
    if override.startswith(("~", "+")):
        return "++" + override.lstrip("+") if override.startswith("+") else override
    return "++" + override


def _one_line(
    exc: Exception,
    config_name: str,
    roots: list[Path],
    overrides: list[str],
    *,
    whole: str | None = None,
) -> ConfigError:
    """Hydra's error as hfsdk's one line: what was wrong, what to do.

    ``whole``: the user's file (quoted), when it has no defaults list and so is the whole
    config.
    """
    from hydra.errors import MissingConfigException

    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    match = re.match(r"Could not override '([^']+)'", text)
    if match:
        key = match.group(1)
        given = next((o for o in overrides if o.split("=", 1)[0] == key), f"{key}=...")
        hint = _close_key(key, roots, config_name)
        meant = f" (did you mean {hint!r}?)" if hint else ""
        if whole is not None:
            return ConfigError(
                f"override {given!r}: {whole} has no defaults list, so it is the whole "
                f"config and lacks {key!r}{meant}; add `defaults: [{config_name}, _self_]` "
                f"to compose it on verl's defaults, or write +{given} to add it"
            )
        return ConfigError(
            f"override {given!r}: verl's {config_name} has no key {key!r}"
            f"{f' (did you mean {hint!r}?)' if hint else ''}; fix its spelling, or write "
            f"+{given} to add a key verl does not define"
        )
    if isinstance(exc, MissingConfigException) and f"'{config_name}'" in first:
        where = ", ".join(str(r) for r in roots if not r.name.startswith("hfsdk-verl-"))
        return ConfigError(
            f"verl config {config_name + '.yaml'!r} is not in {where or 'any directory'}; pass "
            "--verl-config-dir with the directory that holds it (an installed verl's "
            "trainer/config is searched after it)"
        )
    return ConfigError(
        f"verl's {config_name} does not compose: {first}; fix the override or config it names"
    )


def _close_key(key: str, roots: list[Path], config_name: str) -> str | None:
    """The key of the composed config closest to a misspelled ``key``, if any is close."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from hfsdk_migration.importing.mapper import flatten

    name = _SOURCE_NAME if roots[0].name.startswith("hfsdk-verl-") else config_name
    extra = []
    if len(roots) > 1:
        extra = [f"hydra.searchpath=[{','.join(repr(f'file://{r}') for r in roots[1:])}]"]
    try:
        with initialize_config_dir(config_dir=str(roots[0]), version_base=None):
            cfg = hydra_compose(config_name=name, overrides=extra)
    except Exception:
        return None
    keys = list(flatten(OmegaConf.to_container(cfg, resolve=False)))  # type: ignore[arg-type]
    found = difflib.get_close_matches(key, keys, n=1, cutoff=0.8)
    return found[0] if found else None


def resolve(tree: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``tree`` with OmegaConf's interpolations resolved, and one line per value that is not.

    A ``???`` value (mandatory, not given) becomes ``None``; a value that cannot
    be resolved (missing key, unknown resolver, a cycle) stays as written.
    """
    from omegaconf import OmegaConf

    problems: list[str] = []
    cfg = OmegaConf.create(dict(tree))
    return _plain(cfg, (), problems), problems


def _plain(node: Any, path: tuple[str, ...], problems: list[str]) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(node, DictConfig):
        keys: list[Any] = list(node.keys())
    elif isinstance(node, ListConfig):
        keys = list(range(len(node)))
    else:
        return node
    out: Any = {} if isinstance(node, DictConfig) else []
    for key in keys:
        where = (*path, str(key))
        dotted = ".".join(where)
        child = node._get_node(key)
        if OmegaConf.is_missing(node, key) and not OmegaConf.is_interpolation(node, key):
            problems.append(f"{dotted} is ??? (verl requires it; it was not given)")
            value: Any = None
        else:
            try:
                value = _plain(node[key], where, problems)
            except OmegaConfBaseException as exc:
                value = child._value()
                reason = str(exc).strip().splitlines()[0]
                problems.append(f"{dotted} = {value!r} left as written: {reason}")
        if isinstance(out, dict):
            out[key] = value
        else:
            out.append(value)
    return out
