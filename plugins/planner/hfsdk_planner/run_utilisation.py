"""A run's per-stage utilisation: its setup's work over its measured seconds and peaks.

Joins what :mod:`hfsdk_planner.run_plan` knows of a run (each role's model,
kind and devices, the hardware priced at the run's threads per device) with
:mod:`hfsdk_planner.utilisation`'s counting. The planner's step observer logs
:func:`step_utilisation` every step; ``hfsdk plan --check`` shows
:func:`stage_utilisation` beside its predictions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from hfsdk_planner.cluster import Cluster
from hfsdk_planner.utilisation import (
    TIMINGS,
    StageWork,
    StepShape,
    stage_work,
    step_shape,
    utilisation_metrics,
)

if TYPE_CHECKING:  # run_plan's check calls this module: no import back at run time
    from hfsdk_planner.run_plan import RunSetup

PLANNER_STAGES = {
    "generation": ("generation",),
    "preparation": ("old_log_prob", "ref_log_prob", "values"),
    "training": ("update_actor", "update_critic", "update_score_model"),
}
"""The timed stages each ``--check`` stage holds (its device work)."""

CONCURRENT = frozenset({"preparation"})
"""``--check`` stages whose passes run at once (``Algorithm.concurrently``), each on its
role's pool: their devices are busy together, so the stage's rate is per device of them all."""


def setup_roles(setup: RunSetup) -> dict[str, tuple[str, tuple[str, ...], object, int]]:
    """Each model role of ``setup``: (its kind, its work kinds, its model, its devices).

    A role's devices are its pool's; the policy's generation runs on the rollout
    pool's devices when the run has one.
    """
    from hfsdk import get_registry

    spec = get_registry("algorithms")[setup.algorithm].impl
    kinds = {role.name: role.kind for role in spec.roles}
    devices = {role: n for _pool, n, members in setup.pools for role in members}
    works: dict[str, list[str]] = {}
    for stage in setup.dataflow.stages:
        for role, kind in stage.work:
            if kind not in works.setdefault(role, []):
                works[role].append(kind)
    out: dict[str, tuple[str, tuple[str, ...], object, int]] = {}
    for role, kinds_of_work in works.items():
        model = setup.models[role]
        if setup.rollout_devices and "generation" in kinds_of_work:
            out[f"{role}@rollout"] = (kinds[role], ("generation",), model, setup.rollout_devices)
            kinds_of_work = [k for k in kinds_of_work if k != "generation"]
        out[role] = (kinds[role], tuple(kinds_of_work), model, devices.get(role, 1))
    return out


def busy_devices(setup: RunSetup, names: set[str]) -> int:
    """Devices busy at once while the passes timed as ``names`` run together: each distinct
    pool that holds one of them counts its devices once (roles sharing a pool share them)."""
    pool_of = {role: (pool, n) for pool, n, members in setup.pools for role in members}
    busy: dict[str, int] = {}
    for key, (kind, works, _model, devices) in setup_roles(setup).items():
        if not any(TIMINGS.get((kind, work)) in names for work in works):
            continue
        if key.endswith("@rollout"):
            busy["@rollout"] = devices
        else:
            pool, n = pool_of.get(key, (key, devices))
            busy[pool] = n
    return sum(busy.values()) or 1


def setup_stage_work(setup: RunSetup, shape: StepShape) -> dict[str, StageWork]:
    """The work of each timed stage of one step of ``setup`` with ``shape``, each role
    with its own levers (:meth:`RunSetup.workload_for`)."""
    w = setup.workload
    roles = setup_roles(setup)
    return stage_work(
        roles,
        shape,
        recompute=w.recompute,
        weight_bytes=w.dtype_bytes,
        running=w.max_running_sequences,
        workloads={key: setup.workload_for(key.split("@")[0]) for key in roles},
        generation_tp=generation_group(setup),
        dtypes={key: setup.dtype_of(key.split("@")[0]) for key in roles},
    )


def generation_group(setup: RunSetup) -> int:
    """Devices one generation replica spans, as :func:`~hfsdk_planner.run_plan.price_setup`
    lays it out: the rollout pool's ``tp x pp``, else the policy's generation tp (1 where
    it does not divide the devices)."""
    if setup.rollout_devices:
        group = setup.rollout_pool_tp * setup.rollout_pool_pp
        return group if setup.rollout_devices % group == 0 else 1
    for _pool, devices, members in setup.pools:
        for role in members:
            if any(
                (role, "generation") == tuple(w) for st in setup.dataflow.stages for w in st.work
            ):
                tg = setup.model_parallel.get(role, (1, 1, setup.rollout_tp))[2]
                return tg if devices % tg == 0 else 1
    return 1


def shape_of(setup: RunSetup, metrics: Mapping[str, float]) -> StepShape | None:
    """The step's shape from its metrics, with ``setup``'s sequences and decode limit."""
    w = setup.workload
    return step_shape(metrics, w.sequences, w.generated_tokens, w.packing)


def step_utilisation(
    setup: RunSetup, hardware: Cluster, metrics: Mapping[str, float]
) -> dict[str, float]:
    """One step's ``perf/<stage>_flops_per_s``, ``..._mfu`` and bandwidth metrics
    (:func:`~hfsdk_planner.utilisation.utilisation_metrics`) on ``hardware`` (the run's,
    :func:`~hfsdk_planner.run_plan.run_hardware`); ``{}`` without token counts."""
    shape = shape_of(setup, metrics)
    if shape is None:
        return {}
    return utilisation_metrics(timed_work(setup, shape), metrics, hardware)


def timed_work(setup: RunSetup, shape: StepShape) -> dict[str, StageWork]:
    """:func:`setup_stage_work` of the stages whose timing is their work's own seconds.

    Overlapped pipelines (``one_step_off``, ``async``) time generation as the trainer's wait
    for the next batch, not the replicas' decoding: no rate of it means anything.
    """
    work = setup_stage_work(setup, shape)
    if setup.pipeline != "sync":
        work.pop("generation", None)
    return work


@attrs.frozen(kw_only=True)
class StageUtilisation:
    """A ``--check`` stage's achieved rates per device and their shares of the peaks."""

    flops_per_s: float = 0.0
    mfu: float | None = None
    bytes_per_s: float = 0.0
    bandwidth_util: float | None = None


def stage_utilisation(
    setup: RunSetup,
    hardware: Cluster,
    rows: Sequence[Mapping[str, float]],
    measured: Mapping[str, float],
) -> dict[str, StageUtilisation]:
    """Per ``--check`` stage: its work per step (mean over ``rows``) over its ``measured``
    seconds, per device, and the shares of the peaks (``None`` for uncalibrated guesses).

    Preparation's passes run together, so its rate is their FLOPs over the stage's time
    and the devices of every pool they ran on (:func:`busy_devices`).
    """
    shapes = [s for s in (shape_of(setup, r) for r in rows) if s is not None]
    if not shapes:
        return {}
    works = [timed_work(setup, s) for s in shapes]
    out: dict[str, StageUtilisation] = {}
    for stage, names in PLANNER_STAGES.items():
        parts = [w[n] for w in works for n in names if n in w]
        seconds = measured.get(stage, 0.0)
        if not parts or seconds <= 0:
            continue
        flops = math.fsum(p.flops for p in parts) / len(works)
        read = math.fsum(p.bytes for p in parts) / len(works)
        if stage in CONCURRENT:
            # Passes on different pools overlap: their FLOPs ran on all those pools' devices.
            devices = busy_devices(setup, {p.name for p in parts})
        else:
            devices = max(p.devices for p in parts)
        rate, bytes_rate = flops / seconds / devices, read / seconds / devices
        known = hardware.peaks_measured
        # Each pass against its own dtype's peak: the stage's share is their sum.
        shares = math.fsum(p.flops / p.peak(hardware) for p in parts) / len(works)
        out[stage] = StageUtilisation(
            flops_per_s=rate,
            mfu=shares / seconds / devices if known else None,
            bytes_per_s=bytes_rate,
            bandwidth_util=(
                bytes_rate / hardware.bandwidth_per_device(devices) if known and read else None
            ),
        )
    moved = [float(r.get("perf/reshard_bytes", 0.0)) for r in rows]
    seconds = measured.get("transition", 0.0)
    if any(moved) and seconds > 0:
        bytes_rate = math.fsum(moved) / len(moved) / seconds
        known = hardware.peaks_measured
        out["transition"] = StageUtilisation(
            bytes_per_s=bytes_rate,
            bandwidth_util=bytes_rate / hardware.intra_node_bandwidth if known else None,
        )
    return out
