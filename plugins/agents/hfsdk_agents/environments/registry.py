"""Environments by name: the ``hfsdk_register_environments`` hook, ``module:Class`` or
``path/file.py:Class``.

The hook is the agents plugin's own (:mod:`hfsdk_agents.hookspecs`,
added through ``hfsdk_addhooks``), so the core's fixed registry kinds do not
know it; :func:`registered_environments` collects it once per plugin manager,
keeping which plugin registered each name (two plugins registering one name is
an error naming both).
"""

from __future__ import annotations

import importlib
import importlib.util
import weakref
from pathlib import Path
from typing import Any

import attrs

from hfsdk import ConfigError, HfsdkError
from hfsdk_agents.environments.protocol import EnvironmentSpec, environment_spec
from hfsdk_agents.file_modules import import_file


@attrs.frozen
class RegisteredEnvironment:
    """One registered name: the class and the plugin that registered it."""

    cls: type
    plugin: str


_BY_MANAGER: weakref.WeakKeyDictionary[Any, dict[str, RegisteredEnvironment]] = (
    weakref.WeakKeyDictionary()
)
_SPECS: weakref.WeakKeyDictionary[Any, dict[str, EnvironmentSpec]] = weakref.WeakKeyDictionary()


def registered_environments() -> dict[str, RegisteredEnvironment]:
    """Every registered environment of the process's plugin manager, by name."""
    import hfsdk

    manager = hfsdk.get_plugin_manager()
    found = _BY_MANAGER.get(manager)
    if found is not None:
        return found
    found = {}
    hook = getattr(manager.pm.hook, "hfsdk_register_environments", None)
    for impl in reversed(hook.get_hookimpls() if hook is not None else []):

        def register(name: str, cls: Any, *, _plugin: str = impl.plugin_name) -> None:
            if name in found:
                raise HfsdkError(
                    f"environment {name!r} is registered by both plugin {found[name].plugin!r} "
                    f"and plugin {_plugin!r}; uninstall one or block one with "
                    "HFSDK_DISABLE_PLUGINS"
                )
            found[name] = RegisteredEnvironment(cls=cls, plugin=_plugin)

        impl.function(register=register)
    _BY_MANAGER[manager] = found
    return found


def _load_class(spec: str) -> Any:
    """The class named by ``module:Class`` or ``path/to/file.py:Class`` (else one line)."""
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise ConfigError(f"environment {spec!r}: the file {str(path)!r} does not exist")
        try:
            module = import_file(path, "hfsdk_environment_")
        except Exception as err:
            raise ConfigError(
                f"environment {spec!r}: importing it raised {type(err).__name__}: {err}"
            ) from None
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise ConfigError(f"environment {spec!r}: cannot import {target!r} ({err})") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise ConfigError(f"environment {spec!r}: {target!r} has no attribute {attr!r}")
    return cls


def load_environment(name: str) -> EnvironmentSpec:
    """The checked environment ``name``: a registered name, ``module:Class`` or ``file.py:Class``.

    An unknown name is one line listing the registered ones.
    """
    import hfsdk

    specs = _SPECS.setdefault(hfsdk.get_plugin_manager(), {})
    if name in specs:
        return specs[name]
    if ":" in name:
        cls = _load_class(name)
    else:
        registered = registered_environments()
        if name not in registered:
            from hfsdk import unknown_name_message

            raise ConfigError(
                unknown_name_message("environment", name, list(registered))
                + " (or give 'module:Class' / 'path/to/file.py:Class')"
            )
        cls = registered[name].cls
    spec = environment_spec(name, cls)
    specs[name] = spec
    return spec
