"""Plan for a registered algorithm by name; what ``hfsdk plan`` and ``placement: auto`` call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from hfsdk import AlgorithmSpec, Dataflow, HfsdkError, Stage
from hfsdk_planner.cluster import Cluster
from hfsdk_planner.cluster_lookup import get_cluster
from hfsdk_planner.plan import Plan
from hfsdk_planner.search import search_placement
from hfsdk_planner.simulator import SimulatorSettings
from hfsdk_planner.workload import Workload


def algorithm_dataflow(algorithm: str) -> Dataflow:
    """The dataflow derived from the registered spec of ``algorithm`` (its roles' kinds),
    without the policy's generation when the algorithm trains on its dataset's rows."""
    from hfsdk import get_registry

    return spec_dataflow(get_registry("algorithms")[algorithm].impl)


def spec_dataflow(spec: AlgorithmSpec) -> Dataflow:
    """``spec.dataflow`` as the run does it: an algorithm that does not train on generations
    (DPO, SFT: ``trains_on_generations`` false) never runs the policy's generation, so
    that work leaves its stage (the stage stays, empty, to keep the stages' order)."""
    dataflow = spec.dataflow
    if spec.trains_on_generations:
        return dataflow
    skipped = (spec.policy_role, "generation")
    return Dataflow(
        roles=dataflow.roles,
        stages=[
            Stage(name=s.name, work=[w for w in s.work if tuple(w) != skipped], timings=s.timings)
            for s in dataflow.stages
        ],
    )


FUNCTION = "function"
"""The model size of a signal role scored by functions only (no model, no devices)."""


def without_roles(dataflow: Dataflow, drop: set[str] | frozenset[str]) -> Dataflow:
    """``dataflow`` without the roles in ``drop`` (their work leaves every stage)."""
    return Dataflow(
        roles=tuple(r for r in dataflow.roles if r not in drop),
        stages=[
            Stage(name=s.name, work=[w for w in s.work if w[0] not in drop], timings=s.timings)
            for s in dataflow.stages
        ],
    )


def plan_for_algorithm(
    algorithm: str,
    *,
    model_size: object = "7B",
    role_sizes: Mapping[str, object] | None = None,
    num_devices: int | None = None,
    cluster: str | Cluster = "local",
    workload: Workload | None = None,
    settings: SimulatorSettings | None = None,
    use_cache: bool = True,
    threads: int | None = None,
    rank_rows: Mapping[str, int] | None = None,
) -> Plan:
    """Search the fastest placement for a registered algorithm.

    ``model_size`` applies to every role, ``role_sizes`` overrides single roles
    (e.g. ``{"reward": "7B"}``); the size ``"function"`` marks a signal role
    scored by functions only, which runs on the controller and costs no
    device time (it is listed in :attr:`Plan.functions`). ``num_devices``
    defaults to the cluster preset's size (one node for the GPU presets,
    every core for ``local``); ``cluster`` is a preset name, a profile path or
    a :class:`Cluster`. On a CPU profile each device computes on ``threads``
    intra-op threads, priced with the figures the calibration measured at that
    many (:meth:`Cluster.for_threads`); default: what a run on ``num_devices``
    devices would use (:func:`hfsdk.worker_threads`), at most the cores each
    device has to itself. ``rank_rows``: each listed role's device count must divide its
    rows (a trained role's mini-batch, see :mod:`hfsdk_planner.search`).
    """
    dataflow = algorithm_dataflow(algorithm)
    hardware = get_cluster(cluster)
    priced = 0
    if threads is not None and hardware.device_kind != "cpu":
        # A GPU preset has no per-thread figures: the threads would be ignored silently.
        raise HfsdkError(
            f"threads={threads} applies to a CPU profile only, but cluster "
            f"{hardware.name!r} is a {hardware.device_kind}; leave --threads out or plan on a "
            "CPU profile (local, or hfsdk calibrate --output FILE)"
        )
    if hardware.device_kind == "cpu":
        priced = search_threads(hardware, num_devices, threads)
        hardware = hardware.for_threads(priced)
    if num_devices is not None:
        hardware = hardware.with_devices(num_devices)
    role_sizes = dict(role_sizes or {})
    unknown = sorted(set(role_sizes) - set(dataflow.roles))
    if unknown:
        raise HfsdkError(
            f"model sizes given for unknown roles {unknown}; roles of {algorithm!r}: "
            f"{', '.join(dataflow.roles)}"
        )
    models = {role: role_sizes.get(role, model_size) for role in dataflow.roles}
    functions = tuple(
        r for r, size in models.items() if isinstance(size, str) and size.strip() == FUNCTION
    )
    spec_kinds = _role_kinds(algorithm)
    wrong = [r for r in functions if spec_kinds.get(r) != "scorer"]
    if wrong:
        raise HfsdkError(
            f"roles {wrong} are not signals (kind scorer) of {algorithm!r}; only a reward or "
            "cost role can be a function (--role-size reward=function)"
        )
    if functions:
        dataflow = without_roles(dataflow, set(functions))
        models = {r: size for r, size in models.items() if r not in functions}
    plan = search_placement(
        dataflow,
        models,
        hardware,
        workload,
        settings=settings,
        use_cache=use_cache,
        algorithm=algorithm,
        rank_rows=rank_rows,
    )
    return attrs.evolve(plan, functions=functions, threads_per_device=priced)


def search_threads(hardware: Cluster, num_devices: int | None, threads: int | None) -> int:
    """The threads per device a placement search on a CPU profile prices: ``threads`` as
    given (the caller priced them for the whole machine), else the run's automatic choice
    for ``num_devices`` devices, at most the profile's cores per device (more threads only
    contend for them)."""
    from hfsdk import worker_threads

    if threads is not None:
        return max(1, threads)
    cores = hardware.num_devices  # a CPU profile counts one device per core
    devices = max(1, num_devices or cores)
    return max(1, min(worker_threads(0, devices, cores=cores), cores // devices or 1))


def _role_kinds(algorithm: str) -> dict[str, str]:
    from hfsdk import get_registry

    return {r.name: r.kind for r in get_registry("algorithms")[algorithm].impl.roles}


def auto_placement_section(algorithm: str, **kwargs: Any) -> dict[str, Any]:
    """The run config's ``placement`` section chosen by the planner (``placement: auto``).

    Takes the keyword arguments of :func:`plan_for_algorithm`; returns
    ``{"pools": {name: {"devices": n}}, "roles": {role: name}}`` plus
    ``"rollout_tp": {role: tg}`` for the roles that generate (the planner's
    rollout tensor-parallel size, which the 3D-HybridEngine takes when it fits).
    """
    plan = plan_for_algorithm(algorithm, **kwargs)
    section = plan.to_placement_section()
    section["rollout_tp"] = {r.role: r.generation.tg for r in plan.roles if r.generation}
    return section
