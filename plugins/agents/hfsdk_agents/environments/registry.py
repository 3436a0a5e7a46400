"""Environments by name: the ``hfsdk_register_environments`` hook, ``module:Class`` or
``path/file.py:Class``.

The hook is the agents plugin's own (:mod:`hfsdk_agents.hookspecs`, added
through ``hfsdk_addhooks``) and fills the ``environments`` registry kind the plugin
adds (``hfsdk list environments``): the registry keeps which plugin registered
each name, and two plugins registering one name is an error naming both.
"""

from __future__ import annotations

import importlib
import importlib.util
import weakref
from pathlib import Path
from typing import Any

from hfsdk import ConfigError
from hfsdk_agents.environments.protocol import EnvironmentSpec, environment_spec
from hfsdk_agents.file_modules import import_file

_SPECS: weakref.WeakKeyDictionary[Any, dict[str, EnvironmentSpec]] = weakref.WeakKeyDictionary()


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
        except Exception as err:  # the module's own code failed, as a file's is said above
            raise ConfigError(
                f"environment {spec!r}: importing it raised {type(err).__name__}: {err}"
            ) from None
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
        registered = hfsdk.get_registry("environments")
        if name not in registered:
            from hfsdk import unknown_name_message

            raise ConfigError(
                unknown_name_message("environment", name, list(registered))
                + " (or give 'module:Class' / 'path/to/file.py:Class')"
            )
        cls = registered[name].impl
    spec = environment_spec(name, cls)
    specs[name] = spec
    return spec
