"""Auto-mapping: where each role runs and with which parallel layout.

Pure Python (attrs and math only; matplotlib only when drawing a timeline),
so ``hfsdk plan`` starts fast. Entry points: :func:`plan_for_algorithm` for a
registered algorithm, :func:`search_placement` for any :class:`Dataflow`.
"""

from __future__ import annotations

from hfsdk.core.placement.auto import (
    algorithm_dataflow,
    auto_placement_section,
    plan_for_algorithm,
)
from hfsdk.core.placement.cluster import PRESETS, Cluster
from hfsdk.core.placement.cluster_lookup import get_cluster
from hfsdk.core.placement.layout import GenerationLayout, Layout
from hfsdk.core.placement.model_spec import ModelSpec, named_model, resolve_model
from hfsdk.core.placement.partitions import allocations, bell_number, set_partitions
from hfsdk.core.placement.plan import Plan, PoolPlan, RolePlan, SearchStats
from hfsdk.core.placement.search import PlacementSearch, search_placement
from hfsdk.core.placement.simulator import Simulator, SimulatorSettings
from hfsdk.core.placement.workload import RoleTask, Workload

__all__ = [
    "PRESETS",
    "Cluster",
    "GenerationLayout",
    "Layout",
    "ModelSpec",
    "PlacementSearch",
    "Plan",
    "PoolPlan",
    "RolePlan",
    "RoleTask",
    "SearchStats",
    "Simulator",
    "SimulatorSettings",
    "Workload",
    "algorithm_dataflow",
    "allocations",
    "auto_placement_section",
    "bell_number",
    "get_cluster",
    "named_model",
    "plan_for_algorithm",
    "resolve_model",
    "search_placement",
    "set_partitions",
]
