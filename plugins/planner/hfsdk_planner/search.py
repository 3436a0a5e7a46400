"""The auto-mapping search: colocation partition x device allocation x layouts.

For every partition of the roles into colocated groups and every allocation
of the cluster's devices to the groups (each at least its memory minimum),
each role gets its fastest layout on its group's devices (jointly within the
group's per-device memory), stage latencies are combined (colocated roles in
a stage add up, separate pools run concurrently so the stage takes their
maximum) and the fastest mapping is kept.

Exactness and speed: a role's candidate layouts are simulated once per
(role task, device count) and cached, as are colocated groups per (roles,
device count). The allocation enumeration is a depth-first branch and bound
that visits allocations in lexicographic order and skips a subtree only when
a lower bound proves nothing in it is strictly faster than the best mapping
found so far; ties keep the earliest mapping. The result therefore equals an
exhaustive scan in the same order, deterministically.

A role with ``rank_rows`` (a trained role's ``mini_batch_size``, halved for
preference pairs) only gets device counts that divide it: each device is a
data-parallel rank that must hold an equal share of every mini-batch, or the
run's own config check refuses the placement.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import attrs

from hfsdk import Dataflow, HfsdkError
from hfsdk_planner.cluster import Cluster
from hfsdk_planner.memory_model import min_group_devices, sharded_footprint_bytes
from hfsdk_planner.model_spec import ModelSpec, resolve_model
from hfsdk_planner.partitions import set_partitions
from hfsdk_planner.plan import GB, Plan, PoolPlan, RolePlan, SearchStats
from hfsdk_planner.simulator import Candidate, Simulator, SimulatorSettings
from hfsdk_planner.workload import RoleTask, Workload

INF = math.inf


class CandidateCache:
    """Role candidates per (role task, device count), with lookup and hit counts.

    With ``enabled=False`` every lookup simulates again (the same answers,
    slower); used to check the cache changes nothing.
    """

    def __init__(self, simulator: Simulator, enabled: bool = True) -> None:
        self.simulator = simulator
        self.enabled = enabled
        self.lookups = 0
        self.hits = 0
        self._store: dict[tuple[RoleTask, int], tuple[Candidate, ...]] = {}

    def get(self, task: RoleTask, devices: int) -> tuple[Candidate, ...]:
        """The role's Pareto front of candidates on ``devices`` devices."""
        self.lookups += 1
        key = (task, devices)
        if self.enabled:
            found = self._store.get(key)
            if found is not None:
                self.hits += 1
                return found
        result = self.simulator.candidates(task, devices)
        if self.enabled:
            self._store[key] = result
        return result


@attrs.frozen
class GroupChoice:
    """Colocated roles on ``devices`` devices with their chosen candidates.

    ``stage_seconds[s]`` is the group's busy time in stage s: its roles in
    that stage run one after another on the shared devices.
    """

    roles: tuple[str, ...]
    devices: int
    candidates: tuple[Candidate, ...]
    stage_seconds: tuple[float, ...]
    peak_bytes: float


def _merge_fronts(fronts: Sequence[tuple[Candidate, ...]], budget: float) -> tuple[int, ...] | None:
    """Pick one candidate per role: least total time with summed peaks within ``budget``.

    Exact: partial selections are kept only while no other partial selection
    is at least as fast and at least as small (a time/memory Pareto front).
    """
    partial: list[tuple[float, float, tuple[int, ...]]] = [(0.0, 0.0, ())]
    for front in fronts:
        grown = [
            (seconds + cand.total_seconds, memory + cand.peak_bytes, (*choice, index))
            for seconds, memory, choice in partial
            for index, cand in enumerate(front)
            if memory + cand.peak_bytes <= budget
        ]
        grown.sort()
        partial = []
        for entry in grown:
            if not partial or entry[1] < partial[-1][1]:
                partial.append(entry)
        if not partial:
            return None
    return partial[0][2]


class PlacementSearch:
    """Search the fastest mapping of ``dataflow``'s roles onto ``cluster``.

    ``models`` gives each role's model (a :class:`ModelSpec` or anything
    :func:`resolve_model` accepts), or one model for every role.
    """

    def __init__(
        self,
        dataflow: Dataflow,
        models: Mapping[str, object] | object,
        cluster: Cluster,
        workload: Workload | None = None,
        *,
        settings: SimulatorSettings | None = None,
        use_cache: bool = True,
        algorithm: str = "custom",
        rank_rows: Mapping[str, int] | None = None,
    ) -> None:
        if not isinstance(dataflow, Dataflow):
            raise HfsdkError(
                f"the planner needs an algorithm's Dataflow, got {type(dataflow).__name__}"
            )
        if not dataflow.roles:
            raise HfsdkError("the dataflow has no roles; nothing to place")
        self.dataflow = dataflow
        self.cluster = cluster
        self.workload = workload or Workload()
        self.algorithm = algorithm
        self.use_cache = use_cache
        given = rank_rows or {}
        self.rank_rows = {role: n for role, n in given.items() if role in dataflow.roles}
        self.simulator = Simulator(cluster, settings)
        self.cache = CandidateCache(self.simulator, enabled=use_cache)
        self.models = self._resolve_models(models)
        self.tasks = {
            role: RoleTask(
                model=self.models[role],
                work=tuple(
                    (index, kind)
                    for index, stage in enumerate(dataflow.stages)
                    for name, kind in stage.work
                    if name == role
                ),
                workload=self.workload,
            )
            for role in dataflow.roles
        }
        idle = [role for role, task in self.tasks.items() if not task.work]
        if idle:
            raise HfsdkError(
                f"roles {idle} do no work in any stage of the dataflow; every role needs at "
                "least one (stage, work) entry"
            )
        self.num_stages = len(dataflow.stages)
        self._groups: dict[tuple[tuple[str, ...], int], GroupChoice | None] = {}
        self.group_lookups = 0
        self.group_hits = 0

    def _resolve_models(self, models: Mapping[str, object] | object) -> dict[str, ModelSpec]:
        roles = self.dataflow.roles
        if not isinstance(models, Mapping):
            spec = resolve_model(models)  # type: ignore[arg-type]
            return dict.fromkeys(roles, spec)
        unknown = sorted(set(models) - set(roles))
        if unknown:
            raise HfsdkError(
                f"model sizes given for unknown roles {unknown}; roles of {self.algorithm!r}: "
                f"{', '.join(roles)}"
            )
        missing = [role for role in roles if role not in models]
        if missing:
            raise HfsdkError(
                f"no model size for roles {missing}; give one for every role of "
                f"{self.algorithm!r} ({', '.join(roles)}) or a single size for all"
            )
        return {role: resolve_model(models[role]) for role in roles}  # type: ignore[arg-type]

    # -- groups ------------------------------------------------------------------------
    def group_lower_bound(self, roles: Sequence[str]) -> int:
        """Fewest devices the colocated ``roles`` could fit on (from total memory)."""
        return min_group_devices((self.tasks[r] for r in roles), self.cluster.usable_memory)

    def group_choice(self, roles: tuple[str, ...], devices: int) -> GroupChoice | None:
        """Best layouts of colocated ``roles`` on ``devices`` devices (None if nothing fits)."""
        self.group_lookups += 1
        key = (roles, devices)
        if self.use_cache and key in self._groups:
            self.group_hits += 1
            return self._groups[key]
        if any(role in self.rank_rows and self.rank_rows[role] % devices for role in roles):
            # One rank per device could not hold an equal share of the role's mini-batch.
            if self.use_cache:
                self._groups[key] = None
            return None
        fronts = [self.cache.get(self.tasks[role], devices) for role in roles]
        picks = _merge_fronts(fronts, self.cluster.usable_memory)
        choice = None
        if picks is not None:
            chosen = tuple(front[i] for front, i in zip(fronts, picks, strict=True))
            seconds = [0.0] * self.num_stages
            for role, cand in zip(roles, chosen, strict=True):
                for (stage, _kind), value in zip(
                    self.tasks[role].work, cand.work_seconds, strict=True
                ):
                    seconds[stage] += value
            choice = GroupChoice(
                roles=roles,
                devices=devices,
                candidates=chosen,
                stage_seconds=tuple(seconds),
                peak_bytes=math.fsum(c.peak_bytes for c in chosen),
            )
        if self.use_cache:
            self._groups[key] = choice
        return choice

    # -- allocations -------------------------------------------------------------------
    def _group_table(
        self, roles: tuple[str, ...], low: int, high: int
    ) -> tuple[list[tuple[float, ...] | None], list[list[float]], int | None]:
        """Stage vectors for ``low..high`` devices, per-stage prefix minima, first feasible."""
        total = self.cluster.num_devices
        vectors: list[tuple[float, ...] | None] = [None] * (total + 1)
        first = None
        for devices in range(low, high + 1):
            choice = self.group_choice(roles, devices)
            if choice is not None:
                vectors[devices] = choice.stage_seconds
                if first is None:
                    first = devices
        prefix = []
        for s in range(self.num_stages):
            running = INF
            column = []
            for vector in vectors:
                if vector is not None and vector[s] < running:
                    running = vector[s]
                column.append(running)
            prefix.append(column)
        return vectors, prefix, first

    def partition_tables(
        self, partition: tuple[tuple[str, ...], ...]
    ) -> tuple[list[list[tuple[float, ...] | None]], list[list[list[float]]], list[int]] | None:
        """Per group: stage vector by device count, prefix minima, minimum devices.

        None when the partition cannot fit the cluster.
        """
        total = self.cluster.num_devices
        bounds = [self.group_lower_bound(group) for group in partition]
        if sum(bounds) > total:
            return None
        vectors, prefixes, mins = [], [], []
        for index, group in enumerate(partition):
            high = total - (sum(bounds) - bounds[index])
            table, prefix, first = self._group_table(group, bounds[index], high)
            if first is None:
                return None
            vectors.append(table)
            prefixes.append(prefix)
            mins.append(first)
        if sum(mins) > total:
            return None
        return vectors, prefixes, mins

    def iteration_seconds(self, vectors: Sequence[tuple[float, ...]]) -> float:
        """Sum over stages of the slowest group's busy time (the search's objective)."""
        total = 0.0
        for s in range(self.num_stages):
            total += max(vector[s] for vector in vectors)
        return total

    def _best_allocation(
        self,
        vectors: list[list[tuple[float, ...] | None]],
        prefixes: list[list[list[float]]],
        mins: list[int],
        bound: float,
        counters: dict[str, int],
    ) -> tuple[float, tuple[int, ...]] | None:
        """Lexicographically first allocation strictly faster than ``bound`` and all others."""
        k = len(vectors)
        stages = range(self.num_stages)
        suffix = [sum(mins[i:]) for i in range(k)] + [0]
        best_value = INF
        best_alloc: tuple[int, ...] | None = None
        alloc = [0] * k

        def lower_bound(first: int, left: int, maxima: list[float]) -> float:
            # Each remaining group can do no better than its fastest time per
            # stage with the most devices the others' minimums leave it.
            bounds = list(maxima)
            for j in range(first, k):
                cap = left - (suffix[first] - mins[j])
                prefix = prefixes[j]
                for s in stages:
                    value = prefix[s][cap]
                    if value > bounds[s]:
                        bounds[s] = value
            total = 0.0
            for value in bounds:
                total += value
            return total

        def visit(index: int, left: int, maxima: list[float]) -> None:
            nonlocal best_value, best_alloc
            if index == k - 1:
                vector = vectors[index][left]
                if vector is None:
                    return
                counters["evaluated"] += 1
                total = 0.0
                for s in stages:
                    total += maxima[s] if maxima[s] >= vector[s] else vector[s]
                if total < best_value and total < bound:
                    alloc[index] = left
                    best_value, best_alloc = total, tuple(alloc)
                return
            table = vectors[index]
            for devices in range(mins[index], left - suffix[index + 1] + 1):
                vector = table[devices]
                if vector is None:
                    continue
                grown = [a if a >= b else b for a, b in zip(maxima, vector, strict=True)]
                if lower_bound(index + 1, left - devices, grown) >= min(best_value, bound):
                    counters["pruned"] += 1
                    continue
                alloc[index] = devices
                visit(index + 1, left - devices, grown)

        start = [0.0] * self.num_stages
        if lower_bound(0, self.cluster.num_devices, start) >= bound:
            counters["pruned"] += 1
            return None
        visit(0, self.cluster.num_devices, start)
        return None if best_alloc is None else (best_value, best_alloc)

    # -- the search --------------------------------------------------------------------
    def run(self) -> Plan:
        """Search every partition and allocation; return the fastest plan."""
        started = time.perf_counter()
        counters = {"evaluated": 0, "pruned": 0}
        best: tuple[float, tuple[tuple[str, ...], ...], tuple[int, ...]] | None = None
        partitions = feasible = 0
        for partition in set_partitions(self.dataflow.roles):
            partitions += 1
            tables = self.partition_tables(partition)
            if tables is None:
                continue
            feasible += 1
            bound = best[0] if best else INF
            found = self._best_allocation(*tables, bound=bound, counters=counters)
            if found is not None:
                best = (found[0], partition, found[1])
        if best is None:
            raise HfsdkError(self._infeasible_message())
        stats = SearchStats(
            partitions=partitions,
            feasible_partitions=feasible,
            allocations_evaluated=counters["evaluated"],
            subtrees_pruned=counters["pruned"],
            role_lookups=self.cache.lookups,
            role_hits=self.cache.hits,
            group_lookups=self.group_lookups,
            group_hits=self.group_hits,
            seconds=time.perf_counter() - started,
            cache=self.use_cache,
        )
        return self.build_plan(best[1], best[2], stats)

    def build_plan(
        self,
        partition: tuple[tuple[str, ...], ...],
        allocation: tuple[int, ...],
        stats: SearchStats | None = None,
    ) -> Plan:
        """The plan for a given partition and allocation."""
        pools, roles, vectors = [], {}, []
        for group, devices in zip(partition, allocation, strict=True):
            choice = self.group_choice(group, devices)
            if choice is None:
                raise HfsdkError(f"roles {group} do not fit on {devices} devices")
            name = f"{group[0]}_pool"
            vectors.append(choice.stage_seconds)
            pools.append(
                PoolPlan(
                    name=name,
                    devices=devices,
                    roles=group,
                    peak_memory_bytes=choice.peak_bytes,
                    usable_memory_bytes=self.cluster.usable_memory,
                    nodes=self.cluster.pool_nodes(devices),
                )
            )
            for role, cand in zip(group, choice.candidates, strict=True):
                seconds = [0.0] * self.num_stages
                for (stage, _kind), value in zip(
                    self.tasks[role].work, cand.work_seconds, strict=True
                ):
                    seconds[stage] += value
                roles[role] = RolePlan(
                    role=role,
                    pool=name,
                    model=self.models[role].name,
                    num_params=self.models[role].num_params,
                    layout=cand.layout,
                    generation=cand.generation,
                    stage_seconds=seconds,
                    transition_seconds=cand.transition_seconds,
                    transition_stage=next(
                        (stage for stage, kind in self.tasks[role].work if kind == "generation"),
                        None,
                    ),
                    peak_memory_bytes=cand.peak_bytes,
                )
        stage_seconds = [max(v[s] for v in vectors) for s in range(self.num_stages)]
        return Plan(
            algorithm=self.algorithm,
            cluster=self.cluster.name,
            num_devices=self.cluster.num_devices,
            device_memory_bytes=self.cluster.device_memory,
            workload=self.workload,
            stages=[stage.name for stage in self.dataflow.stages],
            pools=pools,
            roles=[roles[role] for role in self.dataflow.roles],
            stage_seconds=stage_seconds,
            iteration_seconds=self.iteration_seconds(vectors),
            stats=stats,
        )

    def _infeasible_message(self) -> str:
        cluster, total = self.cluster, self.cluster.num_devices
        usable = cluster.usable_memory
        parts = ", ".join(
            f"{role} ({self.models[role].name}) {sharded_footprint_bytes(task) / GB:,.0f} GB"
            for role, task in self.tasks.items()
        )
        need = self.group_lower_bound(self.dataflow.roles)
        head = (
            f"no placement of {self.algorithm} fits {total} x {cluster.name} devices "
            f"({usable / GB:.1f} GB usable each)"
        )
        if self.rank_rows:
            rows = ", ".join(f"{role} {n}" for role, n in self.rank_rows.items())
            head += (
                f" whose pools split each trained role's mini-batch rows evenly ({rows}; a "
                "role's device count must divide them)"
            )
        # A CPU profile's devices share one host's memory: more of them add none.
        cpu = cluster.device_kind == "cpu"
        more = "" if cpu else "more devices, "
        if need > total:
            fits = f"more than the host's {usable * total / GB:.1f} GB" if cpu else None
            return (
                f"{head}: even split as finely as possible the roles need {parts} "
                f"(training state, weights and KV cache), i.e. "
                f"{fits or f'at least {need} devices'}; ask for "
                f"{more}smaller models, or a smaller batch/shorter sequences"
            )
        more = "" if cpu else "more devices or "
        return (
            f"{head}: their state needs the memory of at least {need} of the {total} devices, "
            "but no parallel layout fits each device: pipeline stages must split the layers "
            "evenly and tensor parallelism must divide the heads and stay within a node of "
            f"{cluster.devices_per_node}; try {more}a count with more divisors "
            "(e.g. a power of two)"
        )


def search_placement(
    dataflow: Dataflow,
    models: Mapping[str, object] | object,
    cluster: Cluster,
    workload: Workload | None = None,
    *,
    settings: SimulatorSettings | None = None,
    use_cache: bool = True,
    algorithm: str = "custom",
    rank_rows: Mapping[str, int] | None = None,
) -> Plan:
    """The fastest plan for ``dataflow`` with ``models`` on ``cluster`` (see module doc);
    ``rank_rows``: each listed role's device count must divide its rows."""
    return PlacementSearch(
        dataflow,
        models,
        cluster,
        workload,
        settings=settings,
        use_cache=use_cache,
        algorithm=algorithm,
        rank_rows=rank_rows,
    ).run()
