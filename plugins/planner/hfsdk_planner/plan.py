"""The planner's answer: pools, roles per pool, layouts and estimated latencies.

A :class:`Plan` serialises to a plain dict, JSON and YAML and loads back;
:meth:`Plan.to_placement_section` gives the run config's ``placement``
section that the trainer builds resource pools from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HfsdkError
from hfsdk_planner.layout import GenerationLayout, Layout
from hfsdk_planner.workload import Workload

GB = 1e9


@attrs.frozen(kw_only=True)
class RolePlan:
    """Where one role runs and how: its pool, layouts and per-stage seconds.

    ``stage_seconds`` is aligned with :attr:`Plan.stages` (0 where the role is
    idle); the actor's train -> generate transition is included in its first
    generation stage (``transition_stage``) and also shown on its own in
    ``transition_seconds``.
    """

    role: str
    pool: str
    model: str
    num_params: int
    layout: Layout
    generation: GenerationLayout | None
    stage_seconds: tuple[float, ...] = attrs.field(converter=tuple)
    transition_seconds: float = 0.0
    transition_stage: int | None = None
    peak_memory_bytes: float = 0.0


def pool_section(devices: int, nodes: int) -> dict[str, int]:
    """A pool of the ``placement`` section; ``nodes`` only when it spans several, since a
    pool's nodes default to 1 and a multi-node pool left at 1 cannot be placed."""
    return {"devices": devices, "nodes": nodes} if nodes > 1 else {"devices": devices}


@attrs.frozen(kw_only=True)
class PoolPlan:
    """A resource pool: how many devices, over how many nodes, and which colocated
    roles share them."""

    name: str
    devices: int
    roles: tuple[str, ...] = attrs.field(converter=tuple)
    peak_memory_bytes: float
    usable_memory_bytes: float
    nodes: int = 1
    """Nodes the devices spread over evenly (:meth:`Cluster.pool_nodes`)."""


@attrs.frozen(kw_only=True)
class SearchStats:
    """How the search went: work done, cache use and wall time."""

    partitions: int
    feasible_partitions: int
    allocations_evaluated: int
    subtrees_pruned: int
    role_lookups: int
    role_hits: int
    group_lookups: int
    group_hits: int
    seconds: float
    cache: bool

    @property
    def hit_rate(self) -> float:
        """Fraction of (role task, device count) lookups answered by the cache."""
        return self.role_hits / self.role_lookups if self.role_lookups else 0.0

    @property
    def group_hit_rate(self) -> float:
        """Fraction of (colocated group, device count) lookups answered by the cache."""
        return self.group_hits / self.group_lookups if self.group_lookups else 0.0


@attrs.frozen(kw_only=True)
class Plan:
    """A placement and parallelism plan for one algorithm on one cluster."""

    algorithm: str
    cluster: str
    num_devices: int
    device_memory_bytes: float
    workload: Workload
    stages: tuple[str, ...] = attrs.field(converter=tuple)
    pools: tuple[PoolPlan, ...] = attrs.field(converter=tuple)
    roles: tuple[RolePlan, ...] = attrs.field(converter=tuple)
    stage_seconds: tuple[float, ...] = attrs.field(converter=tuple)
    iteration_seconds: float
    stats: SearchStats | None = None
    functions: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    """Signal roles scored by functions only: controller work, no devices, no model."""
    threads_per_device: int = 0
    """CPU threads each device was priced with (a run's plan on a CPU profile; 0: not
    applicable, e.g. GPUs or a search)."""

    def role(self, name: str) -> RolePlan:
        """The plan of role ``name``."""
        for role in self.roles:
            if role.role == name:
                return role
        raise HfsdkError(
            f"plan has no role {name!r}; roles: {', '.join(r.role for r in self.roles)}"
        )

    def pool(self, name: str) -> PoolPlan:
        """The pool called ``name``."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise HfsdkError(
            f"plan has no pool {name!r}; pools: {', '.join(p.name for p in self.pools)}"
        )

    def pool_of(self, role: str) -> PoolPlan:
        """The pool ``role`` runs on."""
        return self.pool(self.role(role).pool)

    def to_placement_section(self) -> dict[str, Any]:
        """The run config's ``placement`` section: pools with device (and node) counts,
        role -> pool."""
        return {
            "pools": {pool.name: pool_section(pool.devices, pool.nodes) for pool in self.pools},
            "roles": {role.role: role.pool for role in self.roles},
        }

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data (dicts, lists, numbers, strings) for JSON or YAML."""
        return {
            "algorithm": self.algorithm,
            "cluster": self.cluster,
            "num_devices": self.num_devices,
            "device_memory_bytes": self.device_memory_bytes,
            "workload": attrs.asdict(self.workload),
            "stages": list(self.stages),
            "stage_seconds": list(self.stage_seconds),
            "iteration_seconds": self.iteration_seconds,
            "pools": [
                {
                    "name": pool.name,
                    "devices": pool.devices,
                    "nodes": pool.nodes,
                    "roles": list(pool.roles),
                    "peak_memory_bytes": pool.peak_memory_bytes,
                    "usable_memory_bytes": pool.usable_memory_bytes,
                }
                for pool in self.pools
            ],
            "roles": [
                {
                    "role": role.role,
                    "pool": role.pool,
                    "model": role.model,
                    "num_params": role.num_params,
                    "layout": attrs.asdict(role.layout),
                    "generation": attrs.asdict(role.generation) if role.generation else None,
                    "stage_seconds": list(role.stage_seconds),
                    "transition_seconds": role.transition_seconds,
                    "transition_stage": role.transition_stage,
                    "peak_memory_bytes": role.peak_memory_bytes,
                }
                for role in self.roles
            ],
            "stats": attrs.asdict(self.stats) if self.stats else None,
            "functions": list(self.functions),
            "threads_per_device": self.threads_per_device,
            "placement": self.to_placement_section(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """Rebuild a plan written by :meth:`to_dict` (the ``placement`` key is derived)."""
        try:
            return cls(
                algorithm=data["algorithm"],
                cluster=data["cluster"],
                num_devices=data["num_devices"],
                device_memory_bytes=data["device_memory_bytes"],
                workload=Workload(**data["workload"]),
                stages=data["stages"],
                stage_seconds=data["stage_seconds"],
                iteration_seconds=data["iteration_seconds"],
                pools=[PoolPlan(**pool) for pool in data["pools"]],
                roles=[
                    RolePlan(
                        **{
                            **role,
                            "layout": Layout(**role["layout"]),
                            "generation": GenerationLayout(**role["generation"])
                            if role.get("generation")
                            else None,
                        }
                    )
                    for role in data["roles"]
                ],
                stats=SearchStats(**data["stats"]) if data.get("stats") else None,
                functions=data.get("functions", ()),
                threads_per_device=int(data.get("threads_per_device", 0) or 0),
            )
        except (KeyError, TypeError) as exc:
            raise HfsdkError(
                f"not a plan written by hfsdk plan: {exc}; regenerate it with `hfsdk plan ... "
                "--output plan.yaml`"
            ) from exc

    def to_json(self, indent: int | None = 2) -> str:
        """The plan as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Load a plan from JSON text."""
        return cls.from_dict(json.loads(text))

    def to_yaml(self) -> str:
        """The plan as YAML text."""
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> Plan:
        """Load a plan from YAML text."""
        from hfsdk import load_yaml_text

        return cls.from_dict(load_yaml_text(text, source="plan"))

    def save(self, path: str | Path) -> None:
        """Write the plan to ``path`` (JSON for ``.json``, YAML otherwise), atomically."""
        from hfsdk import write_text_atomic

        path = Path(path)
        write_text_atomic(path, self.to_json() if path.suffix == ".json" else self.to_yaml())

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        """Read a plan written by :meth:`save`."""
        path = Path(path)
        text = path.read_text()
        return cls.from_json(text) if path.suffix == ".json" else cls.from_yaml(text)

    # -- display -------------------------------------------------------------------------
    def format_table(self) -> str:
        """A readable summary: pools, per-role layouts and seconds, stage totals."""
        w = self.workload
        lines = [
            f"Plan for {self.algorithm}: {len(self.roles)} roles on {self.num_devices} x "
            f"{self.cluster} ({self.device_memory_bytes / GB:.0f} GB each"
            + (f", {self.threads_per_device} CPU thread(s) each" if self.threads_per_device else "")
            + "); "
            f"{w.batch_size} prompts x {w.samples_per_prompt} samples, "
            f"{w.prompt_length} + {w.response_length} tokens, {w.optimizer_steps} updates"
            + (f" x {w.epochs} epochs" if w.epochs > 1 else ""),
            "",
        ]
        pool_rows = [["pool", "devices", "roles", "memory/device (peak / usable)"]]
        for pool in self.pools:
            pool_rows.append(
                [
                    pool.name,
                    str(pool.devices),
                    ", ".join(pool.roles),
                    f"{pool.peak_memory_bytes / GB:.1f} / {pool.usable_memory_bytes / GB:.1f} GB",
                ]
            )
        lines += _columns(pool_rows, right={1})
        lines.append("")
        role_rows = [["role", "pool", "model", "layout", "rollout", *self.stages, "peak GB"]]
        for role in self.roles:
            role_rows.append(
                [
                    role.role,
                    role.pool,
                    role.model,
                    str(role.layout),
                    str(role.generation) if role.generation else "-",
                    *(f"{s:.1f}" if s else "-" for s in role.stage_seconds),
                    f"{role.peak_memory_bytes / GB:.1f}",
                ]
            )
        stage_row = ["stage total", "", "", "", "", *(f"{s:.1f}" for s in self.stage_seconds), ""]
        role_rows.append(stage_row)
        numeric = set(range(5, 6 + len(self.stages)))
        lines += _columns(role_rows, right=numeric)
        if self.functions:
            lines.append(
                f"function signals (on the controller, no model, ~0 s): {', '.join(self.functions)}"
            )
        lines.append("")
        lines.append(
            f"estimated iteration: {self.iteration_seconds:.1f} s (seconds per stage above)"
        )
        if self.stats:
            s = self.stats
            lines.append(
                f"search: {s.partitions} partitions ({s.feasible_partitions} feasible), "
                f"{s.allocations_evaluated:,} allocations evaluated, {s.subtrees_pruned:,} "
                f"subtrees pruned, cache {'on' if s.cache else 'off'}: hit rate "
                f"{s.hit_rate:.1%} of {s.role_lookups:,} lookups, {s.seconds:.2f} s"
            )
        return "\n".join(lines)


def _columns(rows: list[list[str]], right: set[int]) -> list[str]:
    """Align ``rows`` into columns; columns in ``right`` are right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out
