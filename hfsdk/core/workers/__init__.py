"""The hybrid-controller runtime: workers, worker groups, transfer protocols, resource pools.

Names are imported lazily so ``import hfsdk.core.workers`` is cheap and
``from hfsdk.core.workers import register, BuiltinProtocol`` never imports Ray.
See ``docs/runtime.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Worker": "hfsdk.core.workers.worker",
    "WorkerContext": "hfsdk.core.workers.worker",
    "WorkerGroup": "hfsdk.core.workers.worker_group",
    "GroupMethod": "hfsdk.core.workers.worker_group",
    "GroupOptions": "hfsdk.core.workers.worker_group",
    "ResourcePool": "hfsdk.core.workers.resource_pool",
    "LocalPool": "hfsdk.core.workers.local_hosts",
    "register": "hfsdk.core.workers.decorator",
    "BuiltinProtocol": "hfsdk.core.workers.decorator",
    "Protocol": "hfsdk.core.workers.decorator",  # deprecated alias of BuiltinProtocol
    "MeshPosition": "hfsdk.core.workers.mesh",
    "TransferProtocol": "hfsdk.core.workers.protocols.types",
    "DispatchContext": "hfsdk.core.workers.protocols.types",
    "DispatchPlan": "hfsdk.core.workers.protocols.types",
    "CallFuture": "hfsdk.core.workers.futures",
    "CollectSpec": "hfsdk.core.workers.futures",
    "RoleSpec": "hfsdk.core.workers.host",
    "colocate": "hfsdk.core.workers.colocation",
    "connect": "hfsdk.core.workers.ray_runtime",
    "shutdown": "hfsdk.core.workers.ray_runtime",
    "WorkerError": "hfsdk.core.workers.errors",
    "WorkerDiedError": "hfsdk.core.workers.errors",
    "WorkerTimeoutError": "hfsdk.core.workers.errors",
    "InfeasibleResourcesError": "hfsdk.core.workers.errors",
    "ResourceTimeoutError": "hfsdk.core.workers.errors",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hfsdk.core.workers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
