"""Auto-mapping: where each role runs and with which parallel layout.

Pure Python (attrs and math only; matplotlib only when drawing a timeline),
so ``hfsdk plan`` starts fast. Entry points: :func:`plan_for_algorithm` for a
registered algorithm, :func:`search_placement` for any :class:`Dataflow`.

The package loads lazily: the plugin manager imports :mod:`hfsdk_planner.plugin`
at start-up, and nothing of the planner is imported until a name is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Cluster": "hfsdk_planner.cluster",
    "GenerationLayout": "hfsdk_planner.layout",
    "Layout": "hfsdk_planner.layout",
    "ModelSpec": "hfsdk_planner.model_spec",
    "PRESETS": "hfsdk_planner.cluster",
    "PlacementSearch": "hfsdk_planner.search",
    "Plan": "hfsdk_planner.plan",
    "PoolPlan": "hfsdk_planner.plan",
    "RolePlan": "hfsdk_planner.plan",
    "RoleTask": "hfsdk_planner.workload",
    "SearchStats": "hfsdk_planner.plan",
    "Simulator": "hfsdk_planner.simulator",
    "SimulatorSettings": "hfsdk_planner.simulator",
    "Workload": "hfsdk_planner.workload",
    "algorithm_dataflow": "hfsdk_planner.auto",
    "allocations": "hfsdk_planner.partitions",
    "auto_placement_section": "hfsdk_planner.auto",
    "bell_number": "hfsdk_planner.partitions",
    "get_cluster": "hfsdk_planner.cluster_lookup",
    "named_model": "hfsdk_planner.model_spec",
    "plan_for_algorithm": "hfsdk_planner.auto",
    "resolve_model": "hfsdk_planner.model_spec",
    "search_placement": "hfsdk_planner.search",
    "set_partitions": "hfsdk_planner.partitions",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hfsdk_planner' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
