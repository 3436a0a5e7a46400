"""Price a run's own setup: the planner's estimate for a config, and its check against a run.

:func:`run_setup` reads what one iteration of a run does from its config (a
:class:`~hfsdk.core.config.run_config.RunConfig` or the plain ``config.yaml``
dict): each role's real model (``model_path``, else the actor's, else the
default task's), which signals are functions (no model: they run on the
controller and cost about nothing on the devices), the batch, the lengths,
the updates and the pools. Under ``placement.mode: auto`` the pools, the roles'
places and the planned rollout tp are the ones the session resolves
(:func:`resolved_config`: the planner's own resolution on the same inputs, not the
pools the ``auto`` config names).
:func:`price_setup` simulates that fixed placement (no search): each role
data-parallel over its pool's devices (FSDP), or at its ``parallel.tp`` x
``parallel.pp`` on ``backend: megatron``, the actor generating with
``actor.rollout_layout.tp`` (default 1; megatron takes the planned rollout tp
where it regroups its training tp, the fsdp actor never does). The role sections'
keys it reads are the ones both shipped training backends use
(``model_path``, ``dtype``, ``micro_batch_size``, ``forward_micro_batch_size``,
``mini_batch_size``, ``ppo_epochs``, ``gradient_checkpointing``); a section
without them gets the planner's defaults.

:func:`price_setup` is what the trainer logs each step through the planner's
step observer (:mod:`hfsdk_planner.prediction`, ``perf/predicted_step_s``);
:func:`check_run` is ``hfsdk plan --check``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from hfsdk import ROLLOUT_POOL, Dataflow, HfsdkError
from hfsdk_planner.auto import FUNCTION, spec_dataflow, without_roles
from hfsdk_planner.cluster import Cluster
from hfsdk_planner.cluster_lookup import resolve_cluster
from hfsdk_planner.layout import GenerationLayout, Layout
from hfsdk_planner.model_spec import ModelSpec, resolve_model
from hfsdk_planner.plan import Plan, PoolPlan, RolePlan, pool_section
from hfsdk_planner.search import PlacementSearch
from hfsdk_planner.utilisation import BATCH_ROWS, batch_rows
from hfsdk_planner.workload import Workload

logger = logging.getLogger(__name__)

STAGES = ("generation", "preparation", "training", "transition")
"""The stages ``--check`` compares (the transition is the actor's resharding)."""

_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
_SYNC_BUCKET_BYTES = 32 * 2**20  # the weight sync's default bucket


@attrs.frozen(kw_only=True)
class RunSetup:
    """What one iteration of a run does, as the planner sees it.

    ``dataflow`` has only the roles that hold a model; ``functions`` are the
    signal roles scored by functions alone (controller work, no devices).
    ``pools`` are ``(name, devices, roles)`` in the config's order, without
    the rollout replicas' own pool: ``rollout_devices`` (0: the policy
    generates on its own devices) with ``pipeline`` (``trainer.pipeline``).
    """

    algorithm: str
    dataflow: Dataflow
    functions: tuple[str, ...]
    models: Mapping[str, ModelSpec]
    workload: Workload
    pools: tuple[tuple[str, int, tuple[str, ...]], ...]
    dtype: str
    rollout_tp: int
    cluster: str
    in_process: bool
    rollout_devices: int = 0
    rollout_pool_tp: int = 1
    rollout_pool_pp: int = 1
    pipeline: str = "sync"
    weight_sync: str = "stream"
    """``rollout.weight_sync``: ``stream`` copies a sharded actor into a generation module
    each step; ``gather`` unshards it in place and generates on it."""
    threads: int = 1
    """Intra-op threads per device (per worker): what :func:`hfsdk.worker_threads` decides
    for ``trainer.worker_threads`` and the run's device slots; ``hfsdk plan --check`` and
    the run's own step observer replace it with what the run logged it used
    (``perf/worker_threads``)."""
    model_parallel: Mapping[str, tuple[int, int, int]] = attrs.field(factory=dict)
    """``(tp, pp, generation tp)`` of each role on ``backend: megatron`` (``<role>.parallel``,
    ``rollout_layout``): priced at that layout without FSDP's gathers; other roles as FSDP."""
    role_levers: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    """Each role's own :class:`Workload` fields (epochs, recompute, dtype_bytes, lora_rank),
    read from its section: the critic's ``gradient_checkpointing`` is not the actor's."""

    scorers: tuple[str, ...] = ()
    """Every signal role, scored by a model or by functions: each logs its own
    ``timing/<role>_s`` (``Algorithm.stage``), which the measured preparation adds."""

    role_dtypes: Mapping[str, str] = attrs.field(factory=dict)
    """Each role's compute dtype (``<role>.dtype``, default the policy's): the peak its
    utilisation is measured against."""

    def dtype_of(self, role: str) -> str:
        """``role``'s compute dtype (:attr:`role_dtypes`, else the policy's ``dtype``)."""
        return self.role_dtypes.get(role, self.dtype)

    def workload_for(self, role: str) -> Workload:
        """``workload`` with ``role``'s own levers (:attr:`role_levers`)."""
        return attrs.evolve(self.workload, **self.role_levers.get(role, {}))


def _as_dict(config: Any) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    return config.to_dict()


def _default_model_dir() -> str:
    from hfsdk import default_model_dir

    return str(default_model_dir())


def _int(section: Mapping[str, Any], key: str, default: int) -> int:
    value = section.get(key)
    return int(value) if isinstance(value, int | float) and value else default


def model_parallel_roles(cfg: Mapping[str, Any], roles: Any) -> dict[str, tuple[int, int, int]]:
    """``(tp, pp, generation tp)`` of each of ``roles`` whose section says
    ``backend: megatron``; the generation tp as Megatron resolves it: the planned one
    where it regroups the training tp (divides it), else ``rollout_layout.tp``, else
    the training tp (no regrouping)."""
    out = {}
    for role in roles:
        section = cfg.get(role) or {}
        if section.get("backend") == "megatron":
            parallel = section.get("parallel") or {}
            tp = _int(parallel, "tp", 1)
            gen = section.get("rollout_layout") or {}
            planned = _int(gen, "planned_tp", 0)
            # resolve_rollout_layout takes a planned tp only as a regrouping (tg | t).
            gen_tp = planned if planned and tp % planned == 0 else _int(gen, "tp", 0) or tp
            out[role] = (tp, _int(parallel, "pp", 1), gen_tp)
    return out


def resolved_config(config: Any) -> dict[str, Any]:
    """``config`` (a RunConfig or its ``config.yaml`` dict) as the session runs it.

    Under ``placement.mode: auto`` the session resolves the placement into a private
    copy (the config the step observer and ``config.yaml`` see keep ``auto``); this
    resolves it the same way (:func:`planned_placement`, the
    function behind the planner's ``hfsdk_resolve_placement``, on the same config)
    and writes the result where the session does: the pools and the roles' places
    (mode ``manual``), and each generating role's ``rollout_layout.planned_tp``.
    Any other config comes back as its plain dict.
    """
    cfg = _as_dict(config)
    placement = cfg.get("placement") or {}
    if placement.get("mode") != "auto":
        return cfg
    section = planned_placement(cfg)
    cfg["placement"] = {
        **placement,
        "mode": "manual",
        "pools": {name: dict(pool) for name, pool in section["pools"].items()},
        "roles": dict(section["roles"]),
    }
    for role, tp in (section.get("rollout_tp") or {}).items():
        own = cfg.get(role)
        # As the session: only a section with a rollout layout takes the planned tp.
        if tp and isinstance(own, Mapping) and "rollout_layout" in own:
            layout = {**(own.get("rollout_layout") or {}), "planned_tp": int(tp)}
            cfg[role] = {**own, "rollout_layout": layout}
    return cfg


def run_setup(
    config: Any,
    *,
    prompt_length: float | None = None,
    response_length: float | None = None,
    resolve_auto: bool = True,
) -> RunSetup:
    """The planner's view of ``config`` (a RunConfig or its ``config.yaml`` dict).

    ``prompt_length``/``response_length`` are mean token counts per sequence
    when known (a finished run measures them); otherwise the config's maxima.
    ``placement.mode: auto`` is priced at the placement the session resolves
    (:func:`resolved_config`); ``resolve_auto=False`` reads the configured pools
    as they are (what the resolution itself prices its search from).
    """
    from hfsdk import get_registry

    cfg = resolved_config(config) if resolve_auto else _as_dict(config)
    algorithm = str(cfg.get("algo"))
    spec = get_registry("algorithms")[algorithm].impl
    # A reward-model trainer has no policy: its score model sets the batch and the levers.
    policy = spec.main_role
    actor = cfg.get(policy) or {}
    actor_path = actor.get("model_path") or _default_model_dir()
    functions: list[str] = []
    models: dict[str, ModelSpec] = {}
    cache: dict[str, ModelSpec] = {}

    def model(path: str) -> ModelSpec:
        if path not in cache:
            cache[path] = resolve_model(path)
        return cache[path]

    for role in spec.roles:
        section = cfg.get(role.name) or {}
        if role.kind == "scorer":
            scoring_model = section.get("model")
            if not scoring_model:
                functions.append(role.name)
                continue
            models[role.name] = model(scoring_model.get("model_path") or actor_path)
        else:
            models[role.name] = model(section.get("model_path") or actor_path)
    data = cfg.get("data") or {}
    rollout = cfg.get("rollout") or {}
    algo = cfg.get("algorithm") or {}
    batch = _int(data, "batch_size", 1)
    samples = _int(algo, "n_samples_per_prompt", 1) * max(1, _int(rollout, "n", 1))
    sequences = batch * samples
    mini = min(_int(actor, "mini_batch_size", sequences), sequences)
    epochs = _int(actor, "ppo_epochs", 1)
    steps = max(1, math.ceil(sequences / mini))  # per epoch: the workload repeats them
    # An exactly on-policy update (one epoch of one mini-batch, no KL in the reward)
    # skips the old log-probs: the update computes them (Algorithm.needs_old_log_probs).
    skip_old = epochs == 1 and mini >= sequences and not algo.get("kl_in_reward", False)
    if not spec.trains_on_generations:
        # Trained on given data (SFT, DPO), the step is the algorithm's own, not
        # Algorithm.rollout's: the policy's log-probs are computed beside a reference's
        # (DPO's loss compares the two, at every batch size) and never without one (SFT).
        skip_old = not spec.roles_of_kind("frozen_policy")
    drop = set(functions)
    dataflow = without_roles(spec_dataflow(spec), drop)
    if skip_old:
        stages = [
            attrs.evolve(st, work=[w for w in st.work if w != (policy, "inference")])
            for st in dataflow.stages
        ]
        dataflow = Dataflow(roles=dataflow.roles, stages=stages)
    kept = dataflow.roles
    micro = _int(actor, "micro_batch_size", 2)
    forward_micro = _int(actor, "forward_micro_batch_size", 0) or micro
    max_response = _int(rollout, "max_response_length", 1024)
    max_prompt = _int(rollout, "max_prompt_length", _int(data, "max_prompt_length", 1024))
    prompt = max(1, round(prompt_length)) if prompt_length else max_prompt
    response = max(1, round(response_length)) if response_length else max_response
    dtype = str(actor.get("dtype") or "bfloat16")
    running = _int(rollout, "micro_batch_size", 0) or sequences
    workload = Workload(
        batch_size=batch,
        samples_per_prompt=samples,
        prompt_length=prompt,
        response_length=response,
        decode_steps=max_response,
        optimizer_steps=min(steps, sequences),
        micro_batch_size=min(micro, mini),
        forward_micro_batch_size=min(forward_micro, sequences),
        max_running_sequences=running,
        recompute=bool(actor.get("gradient_checkpointing", False)),
        dtype_bytes=_DTYPE_BYTES.get(dtype, 2),
        lora_rank=_int(actor.get("lora") or {}, "rank", 0),
        packing=bool(actor.get("packing", False)),
        epochs=epochs,
    )
    placement = cfg.get("placement") or {}
    pool_cfg = dict(placement.get("pools") or {"global": {"devices": 1}})
    rollout_pool = pool_cfg.pop(ROLLOUT_POOL, None) or {}
    role_pool = placement.get("roles") or {}
    first = next(iter(pool_cfg))
    members: dict[str, list[str]] = {name: [] for name in pool_cfg}
    for role in kept:
        members[role_pool.get(role, first)].append(role)
    pools = tuple(
        (name, int(pool_cfg[name].get("devices", 1)), tuple(roles))
        for name, roles in members.items()
        if roles
    )
    layout = actor.get("rollout_layout") or {}
    trainer = cfg.get("trainer") or {}
    rollout_devices = int(rollout_pool.get("devices", 0) or 0)
    return RunSetup(
        algorithm=algorithm,
        dataflow=dataflow,
        functions=tuple(functions),
        models=models,
        workload=workload,
        pools=pools,
        dtype=dtype,
        # The fsdp actor generates at rollout_layout.tp and never takes the planned tp
        # (hfsdk_backend_fsdp.tp_rollout); megatron's is in model_parallel.
        rollout_tp=_int(layout, "tp", 0) or 1,
        cluster=str(placement.get("cluster") or "auto"),
        in_process=_in_process(cfg, pools) and not rollout_pool,
        rollout_devices=rollout_devices,
        rollout_pool_tp=int(rollout_pool.get("tp", 1) or 1),
        rollout_pool_pp=int(rollout_pool.get("pp", 1) or 1),
        pipeline=str(trainer.get("pipeline") or "sync"),
        weight_sync=str(rollout.get("weight_sync") or "stream"),
        scorers=tuple(role.name for role in spec.roles if role.kind == "scorer"),
        threads=run_threads(trainer, pool_cfg, pools, rollout_pool),
        model_parallel=model_parallel_roles(cfg, kept),
        role_levers=role_levers(cfg, kept, policy, dtype, workload),
        role_dtypes={role: str((cfg.get(role) or {}).get("dtype") or dtype) for role in kept},
    )


def role_levers(
    cfg: Mapping[str, Any],
    roles: Any,
    policy: str,
    default_dtype: str,
    base: Workload | None = None,
) -> dict[str, dict[str, Any]]:
    """Each of ``roles``' own workload settings from its section: its update epochs
    (``ppo_epochs``), activation recomputation (``gradient_checkpointing``), weights'
    width (``dtype``, default the policy's) and, given the run's ``base`` workload, its
    micro-batch sizes (``micro_batch_size``, ``forward_micro_batch_size``: each role's
    backend batches its own passes); LoRA is the policy's alone."""
    out = {}
    for role in roles:
        section = cfg.get(role) or {}
        dtype = str(section.get("dtype") or default_dtype)
        levers: dict[str, Any] = {
            "epochs": _int(section, "ppo_epochs", 1),
            "recompute": bool(section.get("gradient_checkpointing", False)),
            "dtype_bytes": _DTYPE_BYTES.get(dtype, 2),
        }
        if base is not None:
            sequences = base.sequences
            mini = min(_int(section, "mini_batch_size", sequences), sequences)
            micro = min(_int(section, "micro_batch_size", base.micro_batch_size), mini)
            # The backends' own fallback: forward_micro_batch_size, else micro_batch_size.
            forward = _int(section, "forward_micro_batch_size", 0) or micro
            levers["micro_batch_size"] = micro
            levers["forward_micro_batch_size"] = min(forward, sequences)
        if role != policy:
            levers["lora_rank"] = 0
        out[role] = levers
    return out


def run_threads(
    trainer: Mapping[str, Any],
    pool_cfg: Mapping[str, Any],
    pools: tuple[tuple[str, int, tuple[str, ...]], ...],
    rollout_pool: Mapping[str, Any],
) -> int:
    """The threads each worker of the run gets, decided where the run decides them
    (:func:`hfsdk.worker_threads`): ``trainer.worker_threads``, or the cores shared among
    the device slots per node of the pools in use (the rollout pool's included)."""
    from hfsdk import worker_threads

    def per_node(section: Mapping[str, Any]) -> int:
        devices = int(section.get("devices", 1) or 1)
        return max(1, devices // max(1, int(section.get("nodes", 1) or 1)))

    slots = sum(per_node(pool_cfg[name]) for name, _devices, _roles in pools)
    if rollout_pool:
        slots += per_node(rollout_pool)
    return worker_threads(int(trainer.get("worker_threads", 0) or 0), slots)


def priced_threads(setup: RunSetup, hardware: Cluster) -> int:
    """The threads per device a run is priced with on a CPU profile: its ``threads``, at
    most the cores each of its devices has to itself (more only contend for them)."""
    total = sum(devices for _name, devices, _roles in setup.pools) + setup.rollout_devices
    return max(1, min(setup.threads, hardware.num_devices // max(total, 1)))


def run_hardware(setup: RunSetup, cluster: Cluster | str | None = None) -> Cluster:
    """The hardware ``setup`` runs on, as priced: ``cluster`` (default: the config's) with
    the run's devices, its threads per device, its dtype's peak and its executor's costs.

    A CPU profile counts one device per core: the run's ``threads`` per device are
    priced with the figures measured at that many threads (:meth:`Cluster.for_threads`),
    at most the cores each device has to itself (more threads only contend).
    """
    hardware = resolve_cluster(setup.cluster if cluster is None else cluster)
    if hardware.device_kind == "cpu":
        hardware = hardware.for_threads(priced_threads(setup, hardware))
    total = sum(devices for _name, devices, _roles in setup.pools)
    if total > hardware.num_devices or hardware.device_kind == "cpu":
        # A CPU profile describes per-core devices; a run may use any number of them.
        hardware = hardware.with_devices(max(total, 1))
    # Sharded: some training pool spans several devices (a mixed setup is priced so).
    sharded = any(devices > 1 for _name, devices, _roles in setup.pools)
    return hardware.for_dtype(setup.dtype).for_executor(setup.in_process, sharded)


def _in_process(cfg: Mapping[str, Any], pools: tuple) -> bool:
    """Whether the trainer runs the workers in its own process (one pool of one device).

    Mirrors ``trainer.executor``: ``auto`` is in-process exactly for a one-device
    pool on one node (:func:`hfsdk.core.trainer.session.local_executor_problem`).
    """
    trainer = cfg.get("trainer") or {}
    executor = str(trainer.get("executor") or "auto")
    if executor == "ray":
        return False
    placement = cfg.get("placement") or {}
    one_device = len(pools) == 1 and pools[0][1] == 1
    fused = placement.get("colocation", "fused") == "fused"
    return one_device and fused and not trainer.get("ray_address")


def price_setup(setup: RunSetup, cluster: Cluster | str | None = None) -> Plan:
    """The simulated plan of ``setup``'s own placement on ``cluster`` (default: the config's)."""
    given = resolve_cluster(setup.cluster if cluster is None else cluster)
    hardware = run_hardware(setup, given)
    total = sum(devices for _name, devices, _roles in setup.pools)
    search = PlacementSearch(
        setup.dataflow, dict(setup.models), hardware, setup.workload, algorithm=setup.algorithm
    )
    # Each role is priced with its own levers (epochs, recomputation, dtype).
    search.tasks = {
        role: attrs.evolve(task, workload=setup.workload_for(role))
        for role, task in search.tasks.items()
    }
    stages = len(setup.dataflow.stages)
    pools, roles, vectors = [], [], []
    for name, devices, members in setup.pools:
        vector = [0.0] * stages
        peak = 0.0
        for role in members:
            task = search.tasks[role]
            layout, fsdp = run_layout(setup, role, devices)
            gen = None
            if task.generates:
                tg = setup.model_parallel[role][2] if not fsdp else setup.rollout_tp
                tg = tg if devices % tg == 0 else 1
                replica = math.ceil(setup.workload.sequences / (devices // tg))
                running = min(setup.workload.max_running_sequences, replica)
                gen = GenerationLayout(tg=tg, dg=devices // tg, running=running)
            cand = search.simulator.evaluate(task, layout, gen)
            transition = cand.transition_seconds
            gathered = 0.0
            if gen is not None and devices > 1 and fsdp:
                gathered = _gather_seconds(search, setup, role, devices)
                transition += gathered
            seconds = [0.0] * stages
            first_generation = True
            for (stage, kind), value in zip(task.work, cand.work_seconds, strict=True):
                if fsdp:
                    value += _sharding_seconds(search, setup, role, kind, devices)
                if kind == "generation" and first_generation:
                    value += gathered
                    first_generation = False
                seconds[stage] += value
                vector[stage] += value
            peak += cand.peak_bytes
            roles.append(
                RolePlan(
                    role=role,
                    pool=name,
                    model=setup.models[role].name,
                    num_params=setup.models[role].num_params,
                    layout=layout,
                    generation=gen,
                    stage_seconds=seconds,
                    transition_seconds=transition,
                    transition_stage=next(
                        (s for s, kind in task.work if kind == "generation"), None
                    ),
                    peak_memory_bytes=cand.peak_bytes,
                )
            )
        # Every worker call of the pool's roles costs the controller a fixed overhead.
        per_call = hardware.call_overhead
        for stage, calls in enumerate(_calls_per_stage(setup, members)):
            vector[stage] += calls * per_call
        vectors.append(vector)
        pools.append(
            PoolPlan(
                name=name,
                devices=devices,
                roles=members,
                peak_memory_bytes=peak,
                usable_memory_bytes=hardware.usable_memory,
                nodes=hardware.pool_nodes(devices),
            )
        )
    iteration = None
    if setup.rollout_devices:
        iteration = _price_rollout_pool(search, setup, roles, vectors)
    stage_seconds = [max(v[s] for v in vectors) for s in range(stages)]
    return Plan(
        algorithm=setup.algorithm,
        cluster=hardware.name,
        # The run holds its rollout replicas' devices too (a 1 + 1 run uses two).
        num_devices=total + setup.rollout_devices,
        device_memory_bytes=hardware.device_memory,
        workload=setup.workload,
        stages=[s.name for s in setup.dataflow.stages],
        pools=pools,
        roles=roles,
        functions=setup.functions,
        threads_per_device=priced_threads(setup, given) if given.device_kind == "cpu" else 0,
        stage_seconds=stage_seconds,
        iteration_seconds=math.fsum(stage_seconds) if iteration is None else iteration,
    )


def run_layout(setup: RunSetup, role: str, devices: int) -> tuple[Layout, bool]:
    """``role``'s training layout on its pool's ``devices`` and whether it is priced as FSDP:
    Megatron's ``(tp, pp)`` with the rest data-parallel (its shards replicated over d, no
    gathers), else FSDP's (all data-parallel, weights sharded and gathered over them)."""
    tp, pp, _gen_tp = setup.model_parallel.get(role, (1, 1, 1))
    if role not in setup.model_parallel or devices % (tp * pp):
        # (A tp x pp that does not divide the pool is refused at start: price it as FSDP.)
        return Layout(1, 1, devices), True
    return Layout(pp, tp, devices // (tp * pp)), False


def _price_rollout_pool(
    search: PlacementSearch, setup: RunSetup, roles: list[RolePlan], vectors: list[list[float]]
) -> float:
    """Move the policy's generation onto the rollout replicas; the step's seconds.

    The ``rollout_devices`` form replicas of ``rollout_pool_tp`` x
    ``rollout_pool_pp`` devices (``placement.pools.rollout.tp``/``pp``), each
    decoding its share of the sequences; after every update the actor's
    weights are broadcast to them (the transition). ``sync`` runs generation,
    the other stages and the weight sync one after another; ``one_step_off``
    and ``async`` overlap the next batch's generation with this batch's other
    stages, so a step costs the slower of the two plus the sync.
    """
    r = setup.rollout_devices
    at = next(i for i, rp in enumerate(roles) if rp.generation is not None)
    policy = roles[at]
    w = setup.workload_for(policy.role)
    stage = policy.transition_stage
    model = setup.models[policy.role]
    tg, pg = setup.rollout_pool_tp, setup.rollout_pool_pp
    if r % (tg * pg):
        tg = pg = 1
    # A replica's pipeline stages run one after another (one micro-batch): they split
    # the memory, not the time, so a replica decodes like a tg-way one.
    replicas = r // (tg * pg)
    running = min(w.max_running_sequences, math.ceil(w.sequences / replicas))
    gen = GenerationLayout(tg=tg, dg=replicas, running=running)
    total = sum(devices for _n, devices, _roles in setup.pools) + r
    # Overlapped, the replicas decode while the actor's devices train (a shared memory
    # bus on one CPU node is shared by all of them).
    busy = r if setup.pipeline == "sync" else total
    generation = search.simulator.generation_seconds(model, gen, w, busy=busy)
    weights = w.dtype_bytes * model.num_params
    buckets = max(1, math.ceil(weights / _SYNC_BUCKET_BYTES))
    hops = math.ceil(math.log2(r + 1))
    sync = hops * search.simulator.send(weights, total, calls=buckets)
    pool = next(i for i, (_n, _d, members) in enumerate(setup.pools) if policy.role in members)
    vectors[pool][stage] -= policy.stage_seconds[stage]
    seconds = list(policy.stage_seconds)
    seconds[stage] = generation
    roles[at] = attrs.evolve(policy, generation=gen, stage_seconds=seconds, transition_seconds=sync)
    vectors.append([generation if i == stage else 0.0 for i in range(len(seconds))])
    others = math.fsum(max(v[i] for v in vectors) for i in range(len(seconds)) if i != stage)
    if setup.pipeline == "sync":
        return generation + others + sync
    return max(generation, others) + sync


STREAM_COPIES = 3
"""Weight-sized memory passes of a streamed transition besides writing the generation
module: the gather's copy-out into the unit's parameters (read + write) and reading them
for the copy. The generation module is allocated per step, so its write is one fresh
write (``fresh_memory_bandwidth``) where allocations are fresh, else a fourth pass."""


def _gather_seconds(search: PlacementSearch, setup: RunSetup, role: str, devices: int) -> float:
    """The train -> generate transition of a role sharded over ``devices`` ranks.

    FSDP shards over the data-parallel ranks too: before decoding, each rank gathers the
    full weights ((d-1)/d of them, one call per layer unit), copies them into a
    generation module allocated for the step (``weight_sync: stream``; ``gather``
    generates on the unsharded actor itself), and pays the transition's fixed work
    (``reshard_overhead``, fitted on ``stream``).
    """
    sim = search.simulator
    model = setup.models[role]
    weights = setup.workload_for(role).dtype_bytes * model.num_params
    gather = sim.allgather(weights, devices, devices, calls=model.num_layers + 1)
    bandwidth = sim.cluster.bandwidth_per_device(devices)
    if setup.weight_sync == "gather":
        # Unsharded in place: only the gather's copy-out, no generation module.
        return gather + 2 * weights / bandwidth + sim.cluster.reshard_overhead
    copies = STREAM_COPIES * weights / bandwidth
    written = weights / (sim.cluster.fresh_memory_bandwidth or bandwidth)
    return gather + copies + written + sim.cluster.reshard_overhead


def _sharding_seconds(
    search: PlacementSearch, setup: RunSetup, role: str, kind: str, devices: int
) -> float:
    """FSDP's per-layer collectives of ``role``'s ``kind`` of work on ``devices`` ranks.

    A fully sharded (ZeRO-3) training backend shards every role's parameters over its
    pool; generation runs on gathered weights (the transition).
    """
    if devices <= 1 or kind == "generation":
        return 0.0
    w = setup.workload_for(role)
    model = search.models[role]
    per_rank = w.sequences / devices
    width = w.dtype_bytes
    sim = search.simulator
    if kind == "inference":
        passes = math.ceil(per_rank / w.forward_micro_batch)
        return sim.sharded_data_parallel_seconds(model, devices, passes, 0, width)
    micro = max(1, math.ceil(per_rank / (w.optimizer_steps * w.micro_batch_size)))
    passes = micro * w.optimizer_steps * w.epochs
    forwards = passes * (2 if w.recompute else 1)
    return sim.sharded_data_parallel_seconds(model, devices, forwards, passes, width)


def _calls_per_stage(setup: RunSetup, members: tuple[str, ...]) -> list[int]:
    """Worker calls per stage: one per (role, work) entry of the pool's roles."""
    return [sum(1 for role, _kind in s.work if role in members) for s in setup.dataflow.stages]


def measured_lengths(
    metrics: Mapping[str, float], sequences: int, packed: bool = False
) -> tuple[float, float] | None:
    """(prompt, response) tokens per sequence from a step's metrics, if it logged them.

    Per row of the trained batch (``perf/batch_rows`` when logged: DPO has two
    per prompt). Means, except that the response is stretched to the padded width
    (``perf/sequence_width``) the passes run over unless ``packed``.
    """
    response = metrics.get("response_length/mean")
    rate, step_s = metrics.get("perf/throughput_tokens_per_s"), metrics.get("timing/step_s")
    tokens = metrics.get("perf/tokens")
    if tokens is None and rate is not None and step_s:
        tokens = rate * step_s
    sequences = batch_rows(metrics, sequences)
    if response is None or not tokens or sequences < 1:
        return None
    prompt = max(1.0, tokens / sequences - response)
    # Without packing, passes run over rows padded to the batch's longest sequence.
    width = metrics.get("perf/sequence_width")
    if width is not None and not packed:
        response = max(response, width - prompt)
    return prompt, max(1.0, response)


def with_batch_rows(setup: RunSetup, metrics: Mapping[str, float]) -> RunSetup:
    """``setup`` priced for the rows the step really trained (``perf/batch_rows``).

    DPO trains a chosen and a rejected row per prompt: batch x samples counts
    half its sequences. Rows that are not whole prompts' samples, or fewer
    than the updates, leave ``setup`` as it is.
    """
    w = setup.workload
    rows = batch_rows(metrics, w.sequences)
    if rows == w.sequences or rows % w.samples_per_prompt or rows < w.optimizer_steps:
        return setup
    workload = attrs.evolve(w, batch_size=rows // w.samples_per_prompt)
    return attrs.evolve(setup, workload=workload)


# -- hfsdk plan --check -------------------------------------------------------------------
CONCURRENT_STAGES = ("old_log_prob", "ref_log_prob", "values")
"""The passes an algorithm dispatches together (``Algorithm.concurrently``): each one's
timing spans the whole block, whose wall time is the longest of them."""


TRAINING_STAGES = ("update_critic", "update_actor", "update_score_model")
"""The updates the planner's training stage prices (a reward-model trainer's included)."""


def measured_stages(row: Mapping[str, float], scorers: tuple[str, ...] = ()) -> dict[str, float]:
    """Measured seconds per planner stage of one ``metrics.jsonl`` row.

    Generation excludes the resharding (``timing/reshard_s``, shown as the
    transition); preparation includes the ``scorers``' timings by role name (every
    signal, a model's or functions', is timed as ``timing/<role>_s``).
    """

    def timing(name: str) -> float:
        return float(row.get(f"timing/{name}_s", 0.0))

    # The log-prob and value passes are dispatched together (Algorithm.concurrently):
    # each timing runs to its own result, so the block's wall time is the longest.
    concurrent = max(timing(n) for n in CONCURRENT_STAGES)
    return {
        # Clamped: a run that generates nothing (DPO) still logs its resharding.
        "generation": max(0.0, timing("generation") - timing("reshard")),
        "preparation": concurrent + math.fsum(timing(n) for n in (*scorers, "advantages")),
        "training": math.fsum(timing(n) for n in TRAINING_STAGES),
        "transition": timing("reshard"),
    }


@attrs.frozen(kw_only=True)
class CheckRow:
    """Predicted against measured seconds for one stage (or the whole step)."""

    name: str
    predicted: float
    measured: float
    flops_per_s: float = 0.0
    """Achieved FLOP/s per device over the measured seconds (0: none counted)."""
    mfu: float | None = None
    """``flops_per_s`` as a share of the device's peak (None: no measured peak)."""
    bytes_per_s: float = 0.0
    """Achieved bytes/s per device: decode's reads, the transition's gathered bytes."""
    bandwidth_util: float | None = None
    """``bytes_per_s`` as a share of the memory (transition: link) bandwidth."""
    steps: tuple[int, ...] = ()
    """The run's step numbers the measured seconds are taken over."""
    left_out: int = 0
    """The warm-up step left out of them (0: none)."""

    @property
    def ratio(self) -> float:
        """predicted / measured (1.0 is exact; inf when nothing was measured)."""
        return self.predicted / self.measured if self.measured > 0 else math.inf


def _record_lines(path: Path) -> list[int]:
    """The line number of each row ``read_metrics`` returns for ``path``, in its order (it
    keeps none): the lines it keeps are the non-blank JSON objects with an integer step."""
    text = path.read_text(errors="replace") if path.is_file() else ""
    numbers: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:  # damaged: read_metrics skips (and warns of) it
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            numbers.append(number)
    return numbers


def numeric_rows(
    rows: Sequence[Mapping[str, Any]], path: Path, skipped: str
) -> list[dict[str, Any]]:
    """``rows`` (``read_metrics`` of the log at ``path``) with every value a number.

    A number logged as text counts as that number. A value that is no number (a
    hand-edited or merged log) is left out with one warning per key, naming the file, the
    first line holding such a value and how many later lines do, then ``skipped`` (what
    leaving it out means), as ``hfsdk replay`` does: one bad value must not stop the rest.
    NaN (logged as null) is a number here; the callers treat it as they treat NaN.
    """
    bad: dict[str, tuple[int, Any, int]] = {}  # key -> (first row, its value, rows)
    clean: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        values: dict[str, Any] = {}
        for key, value in row.items():
            if key == "step" or isinstance(value, int | float):
                values[key] = value
                continue
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                first, shown, count = bad.get(key, (index, value, 0))
                bad[key] = (first, shown, count + 1)
        clean.append(values)
    if bad:
        lines = _record_lines(path)  # read again only when a warning needs its line numbers
        for key, (first, value, count) in bad.items():
            line = lines[first] if first < len(lines) else "?"  # the file changed since
            text = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            later = f" and on {count - 1} later line{'s' * (count > 2)}" if count > 1 else ""
            logger.warning(
                "%s line %s: %s is %s, not a number; skipped there%s (%s)",
                path,
                line,
                key,
                text,
                later,
                skipped,
            )
    return clean


def read_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A finished run's ``config.yaml`` and ``metrics.jsonl`` rows; one line when unusable."""
    import yaml

    from hfsdk import load_yaml_text, read_config_text, read_metrics

    if not run_dir.is_dir():
        # Else a missing directory, or a file, had its "config.yaml missing".
        state = (
            "a file, not a run directory" if run_dir.exists() else "the directory does not exist"
        )
        raise HfsdkError(
            f"--check {str(run_dir)!r}: {state}; give the directory of a "
            "finished run (hfsdk run --run-dir DIR), the one holding its config.yaml and "
            "metrics.jsonl"
        )
    config_file, metrics_file = run_dir / "config.yaml", run_dir / "metrics.jsonl"
    for path in (config_file, metrics_file):
        if not path.is_file():
            raise HfsdkError(
                f"--check {str(run_dir)!r}: {path.name} is missing; give the directory of a "
                "finished run (hfsdk run --run-dir DIR with trainer.loggers including jsonl)"
            )
    try:
        config = load_yaml_text(read_config_text(config_file), source=str(config_file)) or {}
    except yaml.YAMLError as exc:
        raise HfsdkError(f"--check {str(run_dir)!r}: config.yaml is not YAML ({exc})") from None
    if not isinstance(config, dict) or not config.get("algo"):
        raise HfsdkError(f"--check {str(run_dir)!r}: config.yaml holds no run config (no algo)")
    # Damaged lines are skipped; values that are not finite numbers (NaN is logged as null)
    # count as not logged, so no stage is predicted from them.
    # A value that is no number at all (a hand-edited log) is skipped too, with a warning.
    logged = numeric_rows(read_metrics(run_dir), metrics_file, "not used by the check")
    rows = [{k: v for k, v in row.items() if _finite(v)} for row in logged]
    # A validation before training (val_before_train) logs a row of its own with no step
    # timing: it is no step, and counting it would skip the first real one as warm-up.
    rows = [row for row in rows if "timing/step_s" in row]
    if not rows:
        raise HfsdkError(
            f"--check {str(run_dir)!r}: metrics.jsonl has no steps yet (no row with "
            "timing/step_s); check the run once it has trained a step"
        )
    return config, rows


def _finite(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


_STATISTICS = {
    "mean": lambda xs: math.fsum(xs) / len(xs),
    "median": lambda xs: (
        sorted(xs)[len(xs) // 2]
        if len(xs) % 2
        else math.fsum(sorted(xs)[len(xs) // 2 - 1 : len(xs) // 2 + 1]) / 2
    ),
    "min": min,
}


def check_run(
    run_dir: str | Path,
    cluster: Cluster | str | None = None,
    skip_first: bool = True,
    statistic: str = "mean",
) -> tuple[Plan, list[CheckRow]]:
    """Re-plan a finished run's setup and compare with what it measured, per stage.

    Measured values are the ``statistic`` (``mean``, ``median`` or ``min``:
    the best step, like a calibration's best-of-N) over the run's steps, the
    first one left out when there are more (it includes warm-up); the
    workload uses the run's mean measured lengths.
    """
    if statistic not in _STATISTICS:
        raise HfsdkError(f"statistic {statistic!r} is not one of {', '.join(_STATISTICS)}")
    reduce = _STATISTICS[statistic]
    cfg, rows = read_run(Path(run_dir))
    # placement: auto priced where the session placed it, resolved once for both setups.
    cfg = resolved_config(cfg)
    steady = rows[1:] if skip_first and len(rows) > 1 else rows
    # Numbered as the run logged them (a row without its number: its place in the log).
    numbers = [int(r.get("step", i)) for i, r in enumerate(rows, 1)]
    said = dict(
        steps=tuple(numbers[len(rows) - len(steady) :]),
        left_out=numbers[0] if len(steady) < len(rows) else 0,
    )
    base = run_setup(cfg)
    # The threads the run's workers really used (logged by the planner's step observer);
    # a run from before it logged them is priced with today's decision for its config.
    threads = [int(r["perf/worker_threads"]) for r in steady if r.get("perf/worker_threads")]
    if threads:
        base = attrs.evolve(base, threads=max(threads))
    sequences = base.workload.sequences
    lengths = [measured_lengths(r, sequences, base.workload.packing) for r in steady]
    known = [x for x in lengths if x is not None]
    if known:
        prompt = math.fsum(x[0] for x in known) / len(known)
        response = math.fsum(x[1] for x in known) / len(known)
        base = attrs.evolve(
            run_setup(cfg, prompt_length=prompt, response_length=response), threads=base.threads
        )
    rows = [r[BATCH_ROWS] for r in steady if r.get(BATCH_ROWS)]
    if rows:
        base = with_batch_rows(base, {BATCH_ROWS: round(math.fsum(rows) / len(rows))})
    plan = price_setup(base, cluster)
    per_row = [measured_stages(row, base.scorers) for row in steady]
    measured = {stage: reduce([r[stage] for r in per_row]) for stage in STAGES}
    # A validation runs inside the step's timing but is no work the plan prices.
    step = reduce(
        [
            float(r.get("timing/step_s", 0.0)) - float(r.get("timing/validation_s", 0.0))
            for r in steady
        ]
    )
    predicted = dict(zip(plan.stages, plan.stage_seconds, strict=True))
    transition = math.fsum(r.transition_seconds for r in plan.roles)
    if "generation" in predicted:
        predicted["generation"] -= transition
    predicted["transition"] = transition
    from hfsdk_planner.run_utilisation import StageUtilisation, stage_utilisation

    used = stage_utilisation(base, run_hardware(base, cluster), steady, measured)
    table = [
        CheckRow(
            name=name,
            predicted=predicted.get(name, 0.0),
            measured=measured.get(name, 0.0),
            **attrs.asdict(used.get(name, StageUtilisation())),
            **said,
        )
        for name in STAGES
    ]
    table.append(CheckRow(name="step", predicted=plan.iteration_seconds, measured=step, **said))
    return plan, table


def format_check(
    plan: Plan, table: list[CheckRow], run_dir: str | Path, statistic: str = "mean"
) -> str:
    """The ``--check`` table: stage, predicted s, measured s, predicted/measured."""
    w = plan.workload
    lines = [
        f"Check of {run_dir!s}: {plan.algorithm} on {plan.num_devices} x {plan.cluster}; "
        f"{w.sequences} sequences of {w.prompt_length} + {w.response_length} tokens (mean), "
        f"{w.optimizer_steps} updates"
        + (f" x {w.epochs} epochs" if w.epochs > 1 else "")
        + (
            f"; function signals (controller): {', '.join(plan.functions)}"
            if plan.functions
            else ""
        ),
        "",
        f"{'stage':<12} {'predicted s':>12} {'measured s':>11} {'ratio':>7} "
        f"{'GFLOP/s':>9} {'MFU':>6} {'GB/s':>7} {'BW util':>7}",
    ]

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    for row in table:
        ratio = f"{row.ratio:.2f}" if math.isfinite(row.ratio) else "-"
        flops = f"{row.flops_per_s / 1e9:.1f}" if row.flops_per_s else "-"
        moved = f"{row.bytes_per_s / 1e9:.2f}" if row.bytes_per_s else "-"
        used = share(row.mfu) if row.flops_per_s else "-"
        lines.append(
            f"{row.name:<12} {row.predicted:>12.4f} {row.measured:>11.4f} {ratio:>7} "
            f"{flops:>9} {used:>6} {moved:>7} {share(row.bandwidth_util):>7}"
        )
    threads = (
        f"; devices priced at {plan.threads_per_device} CPU thread(s) each"
        if plan.threads_per_device
        else ""
    )
    lines.append("")
    lines.append(f"ratio = predicted / measured; measured = {_measured_over(table, statistic)}")
    lines.append(
        "GFLOP/s, GB/s: achieved per device over the measured seconds (the planner's count of "
        "the work); MFU, BW util: their share of the device's peak FLOP/s and memory bandwidth "
        f"(transition: link bandwidth) on {plan.cluster}{threads}"
    )
    return "\n".join(lines)


def _measured_over(table: list[CheckRow], statistic: str) -> str:
    """Which of the run's steps the measured seconds are the ``statistic`` of, in words."""
    steps = table[-1].steps if table else ()
    left_out = table[-1].left_out if table else 0
    if not steps:
        return f"{statistic} over the run's steps"
    if len(steps) == 1:
        text = f"step {steps[0]}" + ("" if left_out else " alone")
    else:
        text = f"{statistic} over steps {steps[0]}-{steps[-1]}"
    if left_out:
        return f"{text} (step {left_out}, the warm-up, left out)"
    if len(steps) == 1:
        return f"{text} (the run's only step, its warm-up included)"
    return text


def setup_role_sizes(setup: RunSetup) -> dict[str, object]:
    """``role_sizes`` for the search: each model role's real model, signal functions as none."""
    return {**setup.models, **{role: FUNCTION for role in setup.functions}}


def _split_candidates(total: int) -> list[int]:
    """Rollout-pool sizes worth pricing on ``total`` devices (0: no pool of its own)."""
    if total <= 16:
        return list(range(total))
    sizes = {0, *(2**k for k in range(total.bit_length()) if 2**k < total)}
    sizes |= {total * q // 8 for q in range(1, 8)}
    return sorted(sizes)


def plan_rollout_split(config: Any, num_devices: int, cluster: Cluster | str | None = None) -> Any:
    """``placement: auto`` under ``one_step_off`` / ``async``: the fastest rollout pool.

    Prices every useful split of ``num_devices`` into the training roles'
    devices (placed by :func:`~hfsdk_planner.auto.auto_placement_section`)
    and a rollout pool of its own, plus none at all (generation on the actor's
    devices, no overlap); returns ``(section, plan)`` of the fastest, the
    section with ``placement.pools.rollout`` when it has one.
    """
    from hfsdk_planner.auto import auto_placement_section

    # The configured devices as they are: this prices the resolution's candidates.
    setup = run_setup(config, resolve_auto=False)
    hardware = resolve_cluster(setup.cluster if cluster is None else cluster)
    role_sizes = setup_role_sizes(setup)
    # Every split runs on the same devices, so its workers get the same threads.
    threads = priced_threads(setup, hardware) if hardware.device_kind == "cpu" else None
    best: tuple[float, dict[str, Any], Plan] | None = None
    for rollout in _split_candidates(num_devices):
        train = num_devices - rollout
        # A CPU profile describes per-core devices; a GPU cluster takes whole nodes only.
        cpu = hardware.device_kind == "cpu"
        on = attrs.evolve(hardware, nodes=1, devices_per_node=train) if cpu else hardware
        try:
            section = auto_placement_section(
                setup.algorithm,
                role_sizes=role_sizes,
                num_devices=train,
                cluster=on,
                workload=setup.workload,
                threads=threads,
            )
        except HfsdkError:  # no placement on that many devices (e.g. not whole nodes)
            continue
        roles = section["roles"]
        pools = tuple(
            (
                name,
                int(p["devices"]),
                tuple(r for r in setup.dataflow.roles if roles.get(r) == name),
            )
            for name, p in section["pools"].items()
        )
        candidate = attrs.evolve(
            setup,
            pools=tuple(p for p in pools if p[2]),
            rollout_devices=rollout,
            in_process=setup.in_process and num_devices == 1,
        )
        whole = attrs.evolve(hardware, nodes=1, devices_per_node=num_devices) if cpu else hardware
        plan = price_setup(candidate, whole)
        if rollout:
            section["pools"][ROLLOUT_POOL] = pool_section(rollout, hardware.pool_nodes(rollout))
        if best is None or plan.iteration_seconds < best[0]:
            best = (plan.iteration_seconds, section, plan)
    if best is None:
        raise HfsdkError(
            f"placement: auto found no split of {num_devices} devices into training devices "
            "and a rollout pool; give placement.pools by hand"
        )
    return best[1], best[2]


def planned_placement(config: Any) -> dict[str, Any]:
    """The placement section ``placement.mode=auto`` resolves ``config`` to, without logging.

    ``config`` is a RunConfig or its ``config.yaml`` dict; both give the same section,
    so the step observer, the memory preflight and ``hfsdk plan --check`` price the
    layout the session ran (:func:`~hfsdk_planner.run_plan.run_setup`).
    ``{"pools": {name: {"devices": n}}, "roles": {role: pool}, "rollout_tp": {role: tp}}``:
    the devices of ``placement.pools`` summed, priced on ``placement.cluster``.
    Synchronous runs colocate or split the algorithm's roles; overlapped pipelines
    also size a rollout pool (or none).
    """
    from hfsdk_planner.auto import auto_placement_section

    # The plain dict view: a finished run's config.yaml resolves as its RunConfig did.
    cfg = dict(config) if isinstance(config, Mapping) else config.to_dict()
    placement = cfg.get("placement") or {}
    pools = placement.get("pools") or {"global": {"devices": 1}}
    devices = sum(int((pool or {}).get("devices", 1) or 1) for pool in pools.values())
    cluster = resolve_cluster(str(placement.get("cluster") or "auto"))
    if str((cfg.get("trainer") or {}).get("pipeline") or "sync") != "sync":
        section, _plan = plan_rollout_split(cfg, devices, cluster)
        return section
    # Price the run's own roles: a signal scored by functions costs no device,
    # and each model role has the size its model_path gives. The configured pools,
    # not a resolution of them (this is the resolution).
    setup = run_setup(cfg, resolve_auto=False)
    # Pools the session's config check accepts: each trained role's ranks split its
    # mini-batch evenly.
    return auto_placement_section(
        str(cfg.get("algo")),
        role_sizes=setup_role_sizes(setup),
        num_devices=devices,
        cluster=cluster,
        # Search with the run's batch, lengths and levers, not the defaults.
        workload=setup.workload,
        # The threads the run's workers will use, as the session decides them.
        threads=priced_threads(setup, cluster) if cluster.device_kind == "cpu" else None,
        rank_rows=minibatch_rows(cfg, setup.dataflow.roles),
    )


def minibatch_rows(cfg: Mapping[str, Any], roles: Any) -> dict[str, int]:
    """Each trained fsdp role's rows per mini-batch that its data-parallel ranks (one per
    device) must split evenly: ``mini_batch_size``, in preference pairs (DPO's policy, a
    score model) counted as pairs. Megatron roles (their ranks are tp x pp x dp) and a
    mini-batch of half pairs (refused at config load anyway) add no constraint."""
    from hfsdk import TRAINED_KINDS, get_registry
    from hfsdk_backend_common.engine_support import PAIR_ROWS, paired_roles

    spec = get_registry("algorithms")[str(cfg.get("algo"))].impl
    paired = paired_roles(spec)
    kinds = {role.name: role.kind for role in spec.roles}
    out = {}
    for role in roles:
        section = cfg.get(role) or {}
        mini = section.get("mini_batch_size")
        if kinds.get(role) not in TRAINED_KINDS or section.get("backend") == "megatron":
            continue
        if not isinstance(mini, int) or isinstance(mini, bool) or mini < 1:
            continue
        group = PAIR_ROWS if role in paired else 1
        if mini % group == 0:
            out[role] = mini // group
    return out
