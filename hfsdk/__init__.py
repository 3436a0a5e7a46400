"""hfsdk: a plugin-based SDK for RL post-training of language models.

Public names are loaded lazily so ``import hfsdk`` (and ``hfsdk --help``)
stays fast and never imports torch or ray.
"""

from __future__ import annotations

import importlib
from typing import Any

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("hfsdk")
"""Marker for hook implementations in plugins: ``@hfsdk.hookimpl``."""

_LAZY = {
    "get_plugin_manager": "hfsdk.core.plugin_manager",
    "get_registry": "hfsdk.core.registry",
    "Registry": "hfsdk.core.registry",
    "RegistryEntry": "hfsdk.core.registry",
    "Batch": "hfsdk.core.batch",
    "Worker": "hfsdk.core.workers",
    "WorkerGroup": "hfsdk.core.workers",
    "ResourcePool": "hfsdk.core.workers",
    "register": "hfsdk.core.workers",
    "Protocol": "hfsdk.core.workers",
}

__all__ = ["__version__", "hookimpl", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hfsdk' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
