"""What a run config's roles will hold in memory, from the planner's memory model.

Each role's task comes from :func:`~hfsdk_planner.run_plan.run_setup`
(its model, its work in the algorithm's dataflow, the run's lengths and batch
sizes); the role's own memory levers (``gradient_checkpointing``, ``packing``,
the policy's ``lora.rank``) and dtype are applied to its workload, and
:func:`~hfsdk_planner.memory_model.role_memory` prices it at one device.
On FSDP (sharded data parallelism) a role's ranks split its parameters,
gradients and optimizer state, so a device holds ``resident / devices``; on
``backend: megatron`` only tensor and pipeline parallelism split them (each
data-parallel replica steps its own optimizer, no distributed optimizer), so a
device holds ``resident / (tp * pp)``. Either way it adds the role's
activations; a generating fsdp role sharded over more than one device also adds
the full weight copy it gathers to generate (``dtype`` bytes per parameter over
the rollout tp). Roles sharing a pool add their resident bytes; their activations
are live one role at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from hfsdk_planner.layout import GenerationLayout, Layout
from hfsdk_planner.memory_model import (
    RoleMemory,
    generation_bytes,
    is_lora_policy,
    role_memory,
)
from hfsdk_planner.workload import RoleTask

_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@attrs.frozen(kw_only=True)
class RoleEstimate:
    """One role's bytes per device of its pool (``memory``) and the pool's device count."""

    role: str
    pool: str
    devices: int
    memory: RoleMemory


@attrs.frozen(kw_only=True)
class PoolEstimate:
    """A pool's peak bytes per device: its roles' resident bytes plus the largest transient."""

    pool: str
    devices: int
    roles: tuple[RoleEstimate, ...]

    @property
    def per_device(self) -> float:
        """Peak bytes one device of the pool holds."""
        resident = sum(r.memory.resident for r in self.roles)
        return resident + max((r.memory.transient for r in self.roles), default=0.0)

    @property
    def total(self) -> float:
        """Peak bytes over all the pool's devices."""
        return self.per_device * self.devices


def _section(config: Any, role: str) -> Any:
    sections = getattr(config, "sections", None)
    if isinstance(sections, Mapping):
        return sections.get(role)
    return None


def _lever(section: Any, name: str, default: Any) -> Any:
    return getattr(section, name, default) if section is not None else default


def _policy_lora(config: Any, policy: str) -> int:
    lora = _lever(_section(config, policy), "lora", None)
    return int(getattr(lora, "rank", 0) or 0)


def _is_lora_base(
    config: Any, spec: Any, role: str, members: tuple[str, ...], *, base_lora: int
) -> bool:
    """A reference on the LoRA policy's model in the policy's pool holds no weights of its own."""
    if not base_lora or not spec.has_policy:
        return False
    policy = spec.policy_role
    if role == policy or policy not in members:
        return False
    if spec.kind_of(role) != "frozen_policy":
        return False
    placement = _section(config, "placement")
    if placement is not None and getattr(placement, "colocation", "fused") != "fused":
        return False
    mine = _lever(_section(config, role), "model_path", None)
    return mine is None or mine == _lever(_section(config, policy), "model_path", None)


def run_memory(config: Any, *, mean_sequence_length: int = 0) -> list[PoolEstimate]:
    """Per-pool memory estimates of a run config (a RunConfig or its ``config.yaml`` dict).

    ``mean_sequence_length``: prompt + response tokens of a mean sequence, when
    known (packed passes are sized by it); 0 sizes them by the maxima.
    """
    from hfsdk import get_registry
    from hfsdk_planner.run_plan import run_layout, run_setup

    setup = run_setup(config)
    algo = config["algo"] if isinstance(config, Mapping) else config.algo
    spec = get_registry("algorithms")[algo].impl
    policy = spec.main_role  # a reward-model trainer has no policy: its score model's LoRA
    base = setup.workload
    pools = []
    for pool, devices, members in setup.pools:
        roles = []
        for role in members:
            work = [
                (i, kind)
                for i, stage in enumerate(setup.dataflow.stages)
                for name, kind in stage.work
                if name == role
            ]
            section = _section(config, role)
            lora = _lever(section, "lora", None)
            dtype = _lever(section, "dtype", None)
            workload = attrs.evolve(
                # The role's own micro-batch sizes (run_setup's role_levers), not the actor's.
                setup.workload_for(role),
                recompute=bool(_lever(section, "gradient_checkpointing", False)),
                packing=bool(_lever(section, "packing", False)),
                lora_rank=int(getattr(lora, "rank", 0) or 0) if role == policy else 0,
                dtype_bytes=_DTYPE_BYTES.get(str(dtype), base.dtype_bytes),
                mean_sequence_length=mean_sequence_length,
            )
            task = RoleTask(model=setup.models[role], work=work, workload=workload)
            running = max(1, base.sequences // devices)
            gen = GenerationLayout(tg=1, dg=1, running=running) if task.generates else None
            whole = role_memory(task, Layout(1, 1, 1), gen)
            # The devices one copy of the state is split over: all the pool's on FSDP,
            # tp x pp on megatron (its data-parallel replicas each hold their shard).
            layout, fsdp = run_layout(setup, role, devices)
            resident = whole.resident / (devices if fsdp else layout.model_parallel)
            transient = whole.transient
            if task.generates and fsdp and devices > 1 and not is_lora_policy(task):
                # A sharded fsdp actor gathers (or streams into a generation module) a full
                # copy of its weights, split only over the rollout tp, to generate; the LoRA
                # policy's merged copy (role_memory) already counts it.
                full = GenerationLayout(tg=setup.rollout_tp, dg=1, running=running)
                copy = generation_bytes(task.model, Layout(1, 1, 1), full, workload, True)
                transient = max(transient, copy)
            if _is_lora_base(config, spec, role, members, base_lora=_policy_lora(config, policy)):
                resident = 0.0  # served by the LoRA actor with adapters disabled (shared_base)
            memory = RoleMemory(resident=resident, transient=transient)
            roles.append(RoleEstimate(role=role, pool=pool, devices=devices, memory=memory))
        pools.append(PoolEstimate(pool=pool, devices=devices, roles=tuple(roles)))
    return pools


def host_memory_bytes(path: str = "/proc/meminfo") -> int | None:
    """This machine's available memory (``MemAvailable``), ``None`` where unknown."""
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_warning(
    pools: list[PoolEstimate], *, device_bytes: float | None, host_bytes: float | None
) -> str | None:
    """One line when the run will not fit: each pool per GPU (``device_bytes``) or, CPU-only,
    every pool together against the host (``host_bytes``), since one host holds every
    pool's virtual devices.

    The line names the (largest) pool's largest role and its estimate, so the user knows
    which role's levers to pull (docs/backends.md, "Memory levers").
    """

    def size(n: float) -> str:
        return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"

    def advice(pool: PoolEstimate) -> str:
        top = max(pool.roles, key=lambda r: r.memory.peak)
        return (
            f"the largest is {top.role}: try {top.role}."
            "gradient_checkpointing, packing, a smaller micro_batch_size, actor.lora.rank or "
            "more devices (docs/backends.md#memory-levers)"
        )

    def role_sizes(pool: PoolEstimate, scale: bool) -> str:
        return ", ".join(
            f"{r.role} ~{size(r.memory.peak * (r.devices if scale else 1))}" for r in pool.roles
        )

    if device_bytes is not None:
        for pool in pools:
            if pool.per_device <= device_bytes:
                continue
            return (
                f"pool {pool.pool!r} needs ~{size(pool.per_device)} per device but "
                f"{size(device_bytes)} is available ({role_sizes(pool, False)}); {advice(pool)}"
            )
        return None
    if host_bytes is None or not pools:
        return None
    need = sum(pool.total for pool in pools)
    if need <= host_bytes:
        return None
    if len(pools) == 1:
        (pool,) = pools
        return (
            f"pool {pool.pool!r} needs ~{size(need)} on this machine but {size(host_bytes)} "
            f"is available ({role_sizes(pool, True)}); {advice(pool)}"
        )
    largest = max(pools, key=lambda p: p.total)
    each = ", ".join(f"pool {p.pool!r} ~{size(p.total)}" for p in pools)
    return (
        f"the run's {len(pools)} pools need ~{size(need)} on this machine together ({each}) "
        f"but {size(host_bytes)} is available; the largest is pool {largest.pool!r} "
        f"({role_sizes(largest, True)}), and in it {advice(largest)}"
    )
