"""The body of one worker process: a Ray actor holding one or more role objects.

A plain group's host holds one role; a fused multi-role host holds several
(one process per device that time-shares it). The host sets up the worker
context and ``torch.distributed`` before any role object is built, runs
methods with their data references resolved, and reports failures as data.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import attrs

from hfsdk.core.deadlines import DeadlineExceeded, deadline
from hfsdk.core.workers.errors import CALL_DEADLINE, WorkerFailure
from hfsdk.core.workers.futures import Info, resolve_argument
from hfsdk.core.workers.loopback import (
    LOOPBACK,
    free_loopback_port,
    keep_transports_local,
    loopback_store,
)
from hfsdk.core.workers.mesh import MeshPosition
from hfsdk.core.workers.worker import WorkerContext, active_context

IN_PROCESS_NODE_ID = "local"
"""The ``node_id`` in-process workers report: the controller's own node."""


@attrs.frozen(kw_only=True)
class Placement:
    """Where a host sits: its rank in the group and its device slot's node."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_ip: str


@attrs.frozen(kw_only=True)
class RoleSpec:
    """A role a host builds: its worker class and constructor arguments."""

    worker_cls: type
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)


def _ignore_interrupts() -> None:
    """Ctrl-C reaches a terminal's whole process group: the controller handles it, not us."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _rows(value: Any) -> int | None:
    if isinstance(value, (list, tuple)):
        return len(value)
    # A Batch can only exist if its module was imported; don't pay that import otherwise.
    batch_module = sys.modules.get("hfsdk.core.batch")
    if batch_module is not None and isinstance(value, batch_module.Batch):
        return len(value)
    return None


class WorkerHost:
    """One worker process (wrapped with ``ray.remote`` by the worker group)."""

    def __init__(self, placement: Placement, group_name: str) -> None:
        from hfsdk.core.determinism import apply_from_env

        apply_from_env()  # a deterministic run's workers (trainer.deterministic)
        self.placement = placement
        self.group_name = group_name
        self.roles: dict[str, Any] = {}
        self.device = "cpu"
        self.distributed = False
        self.call_timeout_s: float | None = None
        """Each method call's deadline here; past it the call is interrupted and reported."""

    # -------------------------------------------------------------- setup

    def endpoint(self, loopback: bool = False) -> tuple[str, int]:
        """This node's address and a free port, for rank 0 to host the rendezvous.

        ``loopback`` (every rank on this node): ``127.0.0.1`` and a port free there.
        """
        import ray

        if loopback:
            return LOOPBACK, free_loopback_port()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def setup(
        self,
        roles: Mapping[str, RoleSpec],
        master: tuple[str, int] | None,
        collective_timeout_s: float,
        call_timeout_s: float | None = None,
    ) -> tuple[dict[str, Any] | None, Info]:
        """Pick the device, initialise torch.distributed, then build the role objects.

        Returns ``(process info, info)`` like :meth:`execute`; a constructor that
        raises is reported as a failure of method ``__init__``. ``call_timeout_s``
        is every later call's deadline (see :meth:`execute`).
        """
        current_role = next(iter(roles), "?")
        self.call_timeout_s = call_timeout_s
        _ignore_interrupts()
        from hfsdk.core.logs import configure_worker_logging

        configure_worker_logging("+".join(roles), self.placement.rank)
        try:
            self._init_runtime(master, collective_timeout_s)
            for role, spec in roles.items():
                current_role = role
                context = self._context(role, master)
                with active_context(context):
                    self.roles[role] = spec.worker_cls(*spec.args, **dict(spec.kwargs))
        except Exception as exc:
            return None, (False, None, self._failure(current_role, "__init__", exc))
        import ray

        info = {
            "pid": os.getpid(),
            "node_ip": self.placement.node_ip,
            "node_id": ray.get_runtime_context().get_node_id(),
            "device": self.device,
        }
        return info, (True, None, None)

    def setup_in_process(
        self,
        roles: Mapping[str, RoleSpec],
        init_distributed: bool,
        collective_timeout_s: float,
        call_timeout_s: float | None = None,
    ) -> tuple[dict[str, Any] | None, Info]:
        """:meth:`setup` for a host living in the controller's process (no Ray).

        The device is the current CUDA device when there is one, else the CPU;
        with ``init_distributed`` a one-rank ``torch.distributed`` group is
        created on a store bound to a port the OS picks.
        """
        current_role = next(iter(roles), "?")
        self.call_timeout_s = call_timeout_s
        master = None
        try:
            import torch

            if torch.cuda.is_available():
                self.device = f"cuda:{torch.cuda.current_device()}"
            if init_distributed:
                keep_transports_local()  # a world of one: nothing to reach from outside
                store = loopback_store(1, is_master=True, timeout_s=collective_timeout_s)
                master = (LOOPBACK, store.port)
                self._init_runtime(master, collective_timeout_s, store=store)
            for role, spec in roles.items():
                current_role = role
                with active_context(self._context(role, master)):
                    self.roles[role] = spec.worker_cls(*spec.args, **dict(spec.kwargs))
        except Exception as exc:
            return None, (False, None, self._failure(current_role, "__init__", exc))
        info = {"pid": os.getpid(), "node_ip": self.placement.node_ip,
                "node_id": IN_PROCESS_NODE_ID, "device": self.device}  # fmt: skip
        return info, (True, None, None)

    def _init_runtime(
        self, master: tuple[str, int] | None, collective_timeout_s: float, store: Any = None
    ) -> None:
        """Pick the device (a Ray actor's GPU) and join ``master``'s group (or ``store``'s)."""
        if store is None:
            self._take_ray_gpu()
        p = self.placement
        if master is None:
            return
        addr, port = master
        os.environ.update(
            {
                "MASTER_ADDR": addr,
                "MASTER_PORT": str(port),
                "RANK": str(p.rank),
                "WORLD_SIZE": str(p.world_size),
                "LOCAL_RANK": str(p.local_rank),
                "LOCAL_WORLD_SIZE": str(p.local_world_size),
            }
        )
        import torch.distributed as dist

        if store is None and addr == LOOPBACK:  # a one-node world: rendezvous on loopback
            keep_transports_local()
            store = loopback_store(
                p.world_size, is_master=p.rank == 0, port=port, timeout_s=collective_timeout_s
            )
        # On GPU keep a gloo backend beside NCCL for CPU tensors (offloaded states, metadata).
        backend = "cpu:gloo,cuda:nccl" if self.device.startswith("cuda") else "gloo"
        where = {"store": store} if store is not None else {"init_method": f"tcp://{addr}:{port}"}
        dist.init_process_group(
            backend=backend,
            **where,
            rank=p.rank,
            world_size=p.world_size,
            # The controller bounds the rendezvous (start_timeout_s); this bounds collectives.
            timeout=timedelta(seconds=collective_timeout_s),
        )
        self.distributed = True

    def _take_ray_gpu(self) -> None:
        import ray

        if ray.get_gpu_ids():
            # Ray narrows CUDA_VISIBLE_DEVICES to this actor's GPU, so it is cuda:0 here.
            import torch

            torch.cuda.set_device(0)
            self.device = "cuda:0"

    def _context(self, role: str, master: tuple[str, int] | None) -> WorkerContext:
        p = self.placement
        return WorkerContext(
            role=role,
            rank=p.rank,
            world_size=p.world_size,
            local_rank=p.local_rank,
            local_world_size=p.local_world_size,
            node_ip=p.node_ip,
            device=self.device,
            distributed=self.distributed,
            master_addr=master[0] if master else None,
            master_port=master[1] if master else None,
        )

    # -------------------------------------------------------------- calls

    def execute(
        self,
        role: str,
        method: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        want_result: bool,
        *after: Any,
    ) -> tuple[Any, Info]:
        """Run ``role.method`` and return ``(result, info)``.

        ``after`` are completion tokens of earlier calls on this device by other
        processes; Ray resolves them before this runs, which serialises roles
        that share a device. Arguments that are data references are fetched
        here. A raised exception comes back as a failure in ``info``.
        """
        try:
            target = getattr(self.roles[role], method)
            args = tuple(resolve_argument(a) for a in args)
            kwargs = {k: resolve_argument(v) for k, v in kwargs.items()}
            # Only the method body counts as work: fetching arguments is transfer.
            started = time.perf_counter()
            limit = self.call_timeout_s
            with deadline(limit, f"role {role!r} method {method!r} is past {limit or 0:g} s"):
                result = target(*args, **kwargs)
            busy_s = time.perf_counter() - started
        except DeadlineExceeded as exc:
            return None, (False, None, self._timeout_failure(role, method, exc), 0.0)
        except Exception as exc:
            return None, (False, None, self._failure(role, method, exc), 0.0)
        return (result if want_result else None), (True, _rows(result), None, busy_s)

    def mesh_position(self, role: str, mesh: str) -> MeshPosition | None:
        """The position role ``role`` declared in mesh ``mesh`` (``None`` if undeclared)."""
        return self.roles[role].mesh_position(mesh)

    def _timeout_failure(self, role: str, method: str, exc: BaseException) -> WorkerFailure:
        """A call interrupted at its deadline: where it was is the last frame of its stack."""
        import contextlib

        from hfsdk.core import deadlines

        machinery = (deadlines.__file__, contextlib.__file__)
        frames = traceback.extract_tb(exc.__traceback__)
        inner = [f for f in frames if f.filename not in machinery]
        where = inner[-1] if inner else None
        at = f"; it was at {where.filename}:{where.lineno} in {where.name}" if where else ""
        failure = self._failure(role, method, exc)
        failure.exc_type = CALL_DEADLINE
        failure.message = (
            f"did not finish within {self.call_timeout_s or 0:g} s (trainer.worker_timeout_s){at}"
        )
        return failure

    def _failure(self, role: str, method: str, exc: BaseException) -> WorkerFailure:
        return WorkerFailure(
            role=role,
            rank=self.placement.rank,
            method=method,
            exc_type=type(exc).__name__,
            message=str(exc),
            traceback=traceback.format_exc(),
            pid=os.getpid(),
            node_ip=self.placement.node_ip,
        )
