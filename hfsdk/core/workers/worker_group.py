"""Worker groups: a role's SPMD workers on a resource pool, driven by the controller.

``WorkerGroup(ActorWorker, pool, role="actor")`` starts one worker process
per device of ``pool`` (a Ray actor), initialises ``torch.distributed`` over
them, builds an ``ActorWorker`` in each, and gives the group one method per
``@register``-ed worker method. Calling it dispatches the arguments with the
method's transfer protocol, runs the method on the ranks and collects the
results (blocking), or returns a :class:`~hfsdk.core.workers.futures.CallFuture`.
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.decorator import MethodSpec, registered_methods
from hfsdk.core.workers.errors import WorkerError, WorkerTimeoutError
from hfsdk.core.workers.futures import (
    CallClock,
    CallFuture,
    DataRef,
    is_ray_error,
    take_single,
    wait_for_infos,
)
from hfsdk.core.workers.host import Placement, RoleSpec, WorkerHost
from hfsdk.core.workers.mesh import MeshPosition
from hfsdk.core.workers.protocols.lookup import resolve_protocol
from hfsdk.core.workers.protocols.types import DispatchContext, DispatchPlan, TransferProtocol
from hfsdk.core.workers.resource_pool import ResourcePool
from hfsdk.core.workers.worker import Worker

SHARE_BYTES = 256 * 1024
"""Arguments at least this large that go to several ranks are put in the object store once."""

MESH_QUERY_TIMEOUT_S = 120.0
"""Bound on asking ranks for their mesh position when a group has no call timeout."""

BACKSTOP_S = 5.0
"""Least extra time the controller gives a worker to report its own call deadline."""

_HOST_IDS = itertools.count(1)


def _positive_or_none(_instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and value <= 0:
        raise HfsdkError(f"{attribute.name}={value!r}: expected seconds > 0 (or None)")


@attrs.frozen(kw_only=True)
class GroupOptions:
    """How a group's processes start and how long the controller waits (see WorkerGroup)."""

    init_distributed: bool = True
    start_timeout_s: float = attrs.field(default=120.0, validator=_positive_or_none)
    call_timeout_s: float | None = attrs.field(default=None, validator=_positive_or_none)
    collective_timeout_s: float = attrs.field(default=1800.0, validator=_positive_or_none)
    env_vars: Mapping[str, str] = attrs.field(factory=dict, converter=dict)


@functools.cache
def _remote_host_class() -> Any:
    import ray

    return ray.remote(WorkerHost)


class SharedHosts:
    """Hosts shared by the role views fused on them; :meth:`kill` runs when the last detaches."""

    _views: int = 0

    def attach(self) -> None:
        """Count one more role view using these hosts."""
        self._views += 1

    def detach(self) -> None:
        """One role view is done; kill the hosts when none is left."""
        self._views -= 1
        if self._views <= 0:
            self.kill()

    def kill(self) -> None:
        """Stop the hosts (each kind knows how)."""
        raise NotImplementedError

    def wait_timeout(self, call_timeout_s: float | None) -> float | None:
        """How long the controller waits on a call the hosts interrupt at ``call_timeout_s``."""
        return call_timeout_s


class HostSet(SharedHosts):
    """The worker processes on a pool (one per device), shared by fused roles."""

    def __init__(
        self, pool: ResourcePool, roles: Mapping[str, RoleSpec], *, name: str, options: GroupOptions
    ) -> None:
        self.pool = pool
        self.name = name
        self.roles = dict(roles)
        self.ids = [next(_HOST_IDS) for _ in range(pool.world_size)]
        self.handles: list[Any] = []
        self.process_info: list[dict[str, Any]] = []
        self._views = 0
        pool.reserve(self.ids, role=name)
        try:
            extra: dict[str, Any] = {}
            if options.env_vars:
                extra["runtime_env"] = {"env_vars": dict(options.env_vars)}
            for index, placement in enumerate(_placements(pool)):
                actor_options = {**pool.actor_options(index), **extra}
                handle = _remote_host_class().options(**actor_options).remote(placement, name)
                self.handles.append(handle)
            self._setup(options)
        except BaseException:
            self.kill()
            raise

    def _setup(self, options: GroupOptions) -> None:
        import ray

        timeout_s = options.start_timeout_s
        master = None
        if options.init_distributed:
            # Ranks all on one node meet on its loopback address (nothing listens outside).
            one_node = len({slot.node_id for slot in self.pool.slots}) == 1
            ref = self.handles[0].endpoint.remote(one_node)
            ready, _ = ray.wait([ref], timeout=timeout_s)
            if not ready:
                raise WorkerTimeoutError(
                    f"role {self.name!r}: rank 0 did not start within {timeout_s:g} s "
                    "(start_timeout_s); the cluster may lack CPU for the workers",
                    role=self.name,
                    ranks=[0],
                    method="__init__",
                )
            try:
                master = ray.get(ref, timeout=timeout_s)  # ready: bound a lost node
            except ray.exceptions.RayError as exc:
                raise WorkerError(
                    f"role {self.name!r}: rank 0 failed to start: {exc}",
                    role=self.name,
                    rank=0,
                    method="__init__",
                ) from None
        pairs = [
            h.setup.options(num_returns=2).remote(
                self.roles, master, options.collective_timeout_s, options.call_timeout_s
            )
            for h in self.handles
        ]
        wait_for_infos(
            {rank: info for rank, (_, info) in enumerate(pairs)},
            role=self.name,
            method="__init__",
            timeout=timeout_s,
        )
        # Every info arrived, so the results exist; the bound only guards a lost node.
        self.process_info = ray.get([result for result, _ in pairs], timeout=timeout_s)

    def wait_timeout(self, call_timeout_s: float | None) -> float | None:
        """The workers interrupt a call at ``call_timeout_s`` and report where it hung; the
        controller waits a little longer, so that report wins unless the worker cannot send
        it (stuck in C code, a lost node): then the wait itself times out."""
        if call_timeout_s is None:
            return None
        return call_timeout_s + max(BACKSTOP_S, 0.05 * call_timeout_s)

    def describe_rank(self, rank: int) -> str:
        """``rank 2 (pid 123 on 10.0.0.5)`` once the processes are up."""
        if rank < len(self.process_info):
            info = self.process_info[rank]
            return f"rank {rank} (pid {info['pid']} on {info['node_ip']})"
        return f"rank {rank}"

    def prepare_calls(
        self, calls: Mapping[int, tuple[tuple[Any, ...], dict[str, Any]]]
    ) -> dict[int, tuple[tuple[Any, ...], dict[str, Any]]]:
        """The per-rank arguments as sent: large shared ones go to the object store once."""
        return _share_large_arguments(calls)

    def submit(
        self,
        rank: int,
        call: tuple[str, str, tuple[Any, ...], dict[str, Any], bool],
        after: Sequence[Any],
    ) -> tuple[Any, Any]:
        """Start ``(role, method, args, kwargs, want_result)`` on ``rank``: (result, info) refs."""
        return self.handles[rank].execute.options(num_returns=2).remote(*call, *after)

    def ask_mesh_positions(self, role: str, mesh: str, timeout_s: float) -> list[Any]:
        """Every rank's declared position of ``role`` in ``mesh`` (``None``: undeclared)."""
        import ray

        refs = [h.mesh_position.remote(role, mesh) for h in self.handles]
        return ray.get(refs, timeout=timeout_s)

    def kill(self) -> None:
        """Stop the worker processes and free their device shares."""
        import ray

        if ray.is_initialized():
            for handle in self.handles:
                ray.kill(handle, no_restart=True)
        self.handles = []
        self.pool.unreserve(self.ids)


def _placements(pool: ResourcePool) -> list[Placement]:
    per_node: dict[str, int] = {}
    local: list[int] = []
    for slot in pool.slots:
        local.append(per_node.get(slot.node_id, 0))
        per_node[slot.node_id] = local[-1] + 1
    return [
        Placement(
            rank=rank,
            world_size=pool.world_size,
            local_rank=local[rank],
            local_world_size=per_node[slot.node_id],
            node_ip=slot.node_ip,
        )
        for rank, slot in enumerate(pool.slots)
    ]


def _nbytes(value: Any) -> int:
    # Only a loaded batch module can have made a Batch; don't import it (and torch) here.
    batch_module = sys.modules.get("hfsdk.core.batch")
    if batch_module is not None and isinstance(value, batch_module.Batch):
        tensors = sum(t.numel() * t.element_size() for t in value.tensors.values())
        return tensors + sum(a.nbytes for a in value.non_tensors.values())
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    nbytes = getattr(value, "nbytes", None)  # numpy arrays; tensors below
    if isinstance(nbytes, int):
        return nbytes
    if hasattr(value, "element_size") and hasattr(value, "numel"):
        return int(value.numel() * value.element_size())
    return 0


def _share_large_arguments(
    calls: Mapping[int, tuple[tuple[Any, ...], dict[str, Any]]],
) -> dict[int, tuple[tuple[Any, ...], dict[str, Any]]]:
    """Put large objects sent to several ranks in the object store once (not once per rank)."""
    import ray

    seen: dict[int, int] = {}
    objects: dict[int, Any] = {}
    for args, kwargs in calls.values():
        for value in (*args, *kwargs.values()):
            seen[id(value)] = seen.get(id(value), 0) + 1
            objects[id(value)] = value
    shared: dict[int, DataRef] = {}
    for key, count in seen.items():
        if count > 1 and _nbytes(objects[key]) >= SHARE_BYTES:
            ref = ray.put(objects[key])
            shared[key] = DataRef(
                result_refs=[ref], info_refs=[], source="controller", transform=take_single
            )
    if not shared:
        return dict(calls)
    return {
        rank: (
            tuple(shared.get(id(a), a) for a in args),
            {k: shared.get(id(v), v) for k, v in kwargs.items()},
        )
        for rank, (args, kwargs) in calls.items()
    }


class GroupMethod:
    """A worker method as the controller calls it: ``group.method(...)``.

    Calling it blocks or returns a future as ``@register(blocking=...)`` says;
    :meth:`submit` always returns a :class:`CallFuture`.
    """

    def __init__(
        self, group: WorkerGroup, name: str, protocol: TransferProtocol, spec: MethodSpec
    ) -> None:
        self._group = weakref.ref(group)
        self.name = name
        self.protocol = protocol
        self.spec = spec
        self.__doc__ = getattr(getattr(group.worker_cls, name), "__doc__", None)

    def __repr__(self) -> str:
        group = self._group()
        role = group.role if group is not None else "?"
        return f"<group method {role}.{self.name} via {self.protocol.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Dispatch, run on the ranks, and collect (or return a future if non-blocking)."""
        started = time.perf_counter()
        future = self.submit(*args, **kwargs)
        if not self.spec.blocking:
            return future
        value = future.result()
        group = self._group()
        if group is not None:
            group.clock.record(time.perf_counter() - started, future.busy_s())
        return value

    def submit(self, *args: Any, **kwargs: Any) -> CallFuture:
        """Dispatch and return at once with a future of the collected result."""
        group = self._group()
        if group is None:
            raise HfsdkError(f"the worker group of method {self.name!r} no longer exists")
        return group._submit(self.name, self.protocol, self.spec.options, args, kwargs)


class WorkerGroup:
    """A role's SPMD workers: one process per device of ``pool``, one torch.distributed group.

    ``worker_cls`` is a :class:`Worker` subclass built on every rank with
    ``args``/``kwargs``; each ``@register``-ed method becomes a
    :class:`GroupMethod` attribute. ``init_distributed`` sets up
    ``torch.distributed`` (gloo on CPU, NCCL on GPU) with the rendezvous on
    rank 0. Timeouts: ``start_timeout_s`` bounds starting the processes and
    running the constructors; ``call_timeout_s`` bounds waiting for a call's
    result (``None``: wait while the workers live — a dead process is always
    reported); ``collective_timeout_s`` is torch.distributed's timeout for a
    collective. ``env_vars`` are set in the worker processes.

    Groups on different pools run concurrently; groups sharing a pool's
    devices (see :func:`~hfsdk.core.workers.colocation.colocate`) run one
    call after another on each shared device.
    """

    role: str
    worker_cls: type[Worker]
    call_timeout_s: float | None

    def __init__(
        self,
        worker_cls: type[Worker],
        pool: ResourcePool,
        *,
        role: str = "worker",
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        init_distributed: bool = True,
        start_timeout_s: float = 120.0,
        call_timeout_s: float | None = None,
        collective_timeout_s: float = 1800.0,
        env_vars: Mapping[str, str] | None = None,
    ) -> None:
        options = GroupOptions(
            init_distributed=init_distributed,
            start_timeout_s=start_timeout_s,
            call_timeout_s=call_timeout_s,
            collective_timeout_s=collective_timeout_s,
            env_vars=env_vars or {},
        )
        check_worker_class(worker_cls, role)
        spec = RoleSpec(worker_cls=worker_cls, args=tuple(args), kwargs=dict(kwargs or {}))
        # Resolve protocols before starting processes: a typo fails in milliseconds.
        methods = _resolve_methods(worker_cls, role)
        hosts = HostSet(pool, {role: spec}, name=role, options=options)
        self._bind(hosts, role, worker_cls, methods, call_timeout_s)

    @classmethod
    def _on_hosts(
        cls, hosts: HostSet, role: str, worker_cls: type[Worker], call_timeout_s: float | None
    ) -> WorkerGroup:
        """A group view of one role living in ``hosts`` (fused multi-role processes)."""
        group = cls.__new__(cls)
        group._bind(hosts, role, worker_cls, _resolve_methods(worker_cls, role), call_timeout_s)
        return group

    def _bind(
        self,
        hosts: HostSet,
        role: str,
        worker_cls: type[Worker],
        methods: Mapping[str, tuple[TransferProtocol, MethodSpec]],
        call_timeout_s: float | None,
    ) -> None:
        self._hosts = hosts
        self.role = role
        self.worker_cls = worker_cls
        self.call_timeout_s = call_timeout_s
        self.clock = CallClock()
        """Where its blocking calls are timed; a training session shares one among its groups."""
        self._mesh_cache: dict[str, tuple[MeshPosition, ...]] = {}
        self._closed = False
        hosts.attach()
        # A group dropped without shutdown() still frees its processes and device shares.
        self._release = weakref.finalize(self, hosts.detach)
        self.methods = {}
        for name, (protocol, spec) in methods.items():
            method = GroupMethod(self, name, protocol, spec)
            self.methods[name] = method
            setattr(self, name, method)

    # -------------------------------------------------------------- shape

    @property
    def pool(self) -> ResourcePool:
        """The resource pool the workers run on."""
        return self._hosts.pool

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return len(self._hosts.ids)

    @property
    def process_info(self) -> list[dict[str, Any]]:
        """Per rank: ``pid``, ``node_ip``, ``node_id`` and ``device`` of the worker process."""
        return [dict(info) for info in self._hosts.process_info]

    def __repr__(self) -> str:
        return (
            f"WorkerGroup({self.role!r}, {self.worker_cls.__name__}, {self.world_size} ranks on "
            f"{self.pool.name!r}, methods={sorted(self.methods)})"
        )

    # -------------------------------------------------------------- calls

    def mesh_positions(self, mesh: str) -> tuple[MeshPosition, ...]:
        """Every rank's declared position in mesh ``mesh`` (asked once, then cached)."""
        if mesh not in self._mesh_cache:
            self._check_open()
            timeout_s = self.call_timeout_s or MESH_QUERY_TIMEOUT_S
            try:
                positions = self._hosts.ask_mesh_positions(self.role, mesh, timeout_s)
            except Exception as exc:
                if not is_ray_error(exc, "GetTimeoutError"):
                    raise
                raise WorkerTimeoutError(
                    f"role {self.role!r}: ranks did not answer which position they hold in mesh "
                    f"{mesh!r} within {timeout_s:g} s; a rank may be stuck in an earlier call",
                    role=self.role,
                    ranks=list(range(self.world_size)),
                    method="mesh_position",
                ) from None
            if missing := [rank for rank, p in enumerate(positions) if p is None]:
                raise HfsdkError(
                    f"role {self.role!r}: ranks {missing} did not declare mesh {mesh!r}; call "
                    f"self.declare_mesh({mesh!r}, pp=..., tp=...) (or set_mesh_position) in the "
                    "worker's __init__ or in a method run before the first mesh-protocol call"
                )
            self._mesh_cache[mesh] = tuple(positions)
        return self._mesh_cache[mesh]

    def _submit(
        self,
        method: str,
        protocol: TransferProtocol,
        options: Mapping[str, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> CallFuture:
        self._check_open()
        context = DispatchContext(
            role=self.role,
            method=method,
            protocol=protocol.name,
            world_size=self.world_size,
            options=dict(options),
            mesh_lookup=self.mesh_positions,
        )
        plan = protocol.dispatch(context, args, kwargs)
        self._check_plan(plan, context)
        spec = plan.collect_spec()
        wanted = set(spec.ranks)
        hosts = self._hosts
        calls = hosts.prepare_calls(plan.calls)
        result_refs: dict[int, Any] = {}
        info_refs: dict[int, Any] = {}
        for rank in sorted(calls):
            call_args, call_kwargs = calls[rank]
            host_id = hosts.ids[rank]
            slot = hosts.pool.slots[rank]
            # Another process on this device ran last: run after it (colocated roles
            # time-share the device; every device sees calls in the controller's order).
            after = [slot.last[1]] if slot.last is not None and slot.last[0] != host_id else []
            call = (self.role, method, call_args, call_kwargs, rank in wanted)
            result, info = hosts.submit(rank, call, after)
            slot.last = (host_id, info)
            result_refs[rank] = result
            info_refs[rank] = info
        return CallFuture(
            role=self.role,
            method=method,
            protocol=protocol,
            spec=spec,
            result_refs=result_refs,
            info_refs=info_refs,
            timeout_s=hosts.wait_timeout(self.call_timeout_s),
            describe_rank=hosts.describe_rank,
        )

    def _check_plan(self, plan: Any, context: DispatchContext) -> None:
        if not isinstance(plan, DispatchPlan):
            raise context.error(
                f"dispatch returned {type(plan).__name__}; a dispatch must return a DispatchPlan"
            )
        bad = [r for r in plan.calls if not (isinstance(r, int) and 0 <= r < self.world_size)]
        if bad or not plan.calls:
            raise context.error(
                f"dispatch planned calls on ranks {sorted(plan.calls, key=str)}; expected a "
                f"non-empty subset of 0..{self.world_size - 1}"
            )
        collect = plan.collect_ranks or ()
        if any(r not in plan.calls for r in collect):
            raise context.error(
                f"dispatch collects from ranks {list(collect)} but only ranks "
                f"{sorted(plan.calls)} run"
            )

    # -------------------------------------------------------------- lifetime

    def _check_open(self) -> None:
        if self._closed:
            raise HfsdkError(f"worker group {self.role!r} was shut down; build a new one")

    def shutdown(self) -> None:
        """Stop this role (the processes stop when no fused role uses them any more)."""
        if not self._closed:
            self._closed = True
            self._release()  # runs hosts.detach() once

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def check_worker_class(worker_cls: Any, role: str) -> None:
    """Fail early (with what to do) when ``worker_cls`` is not a Worker subclass."""
    if not (isinstance(worker_cls, type) and issubclass(worker_cls, Worker)):
        raise HfsdkError(
            f"role {role!r}: {worker_cls!r} is not a Worker subclass; derive the class from "
            "hfsdk.Worker"
        )


def _resolve_methods(
    worker_cls: type[Worker], role: str
) -> dict[str, tuple[TransferProtocol, MethodSpec]]:
    methods: dict[str, tuple[TransferProtocol, MethodSpec]] = {}
    for name, spec in registered_methods(worker_cls).items():
        if name.startswith("_") or hasattr(WorkerGroup, name):
            raise HfsdkError(
                f"role {role!r}: registered method {worker_cls.__name__}.{name} clashes with a "
                "WorkerGroup attribute (or is private); rename the method"
            )
        try:
            protocol = resolve_protocol(spec.protocol)
        except HfsdkError as exc:
            # Keep the error's class (UnknownNameError for a typo) and add where it came from.
            message = f"role {role!r} method {worker_cls.__name__}.{name}: {exc}"
            raise type(exc)(message) from None
        methods[name] = (protocol, spec)
    return methods
