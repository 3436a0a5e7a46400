"""In-process workers: a one-device pool's roles built in the controller's own process.

A run whose roles all share one device on one machine gains nothing from
worker processes: every call would still run one after another on that
device, and each Ray round trip costs milliseconds (``benchmarks/
dispatch_overhead.py``: 1.9 ms for an empty call on the 2-core machine), a
large share of a small model's step. :class:`LocalHostSet` builds the roles
in this process instead and runs each call directly; results come back as
:class:`~hfsdk.core.workers.futures.LocalRef` objects, so worker groups,
futures, data references and transfer protocols work unchanged.
``trainer.executor`` chooses (``auto``: in-process exactly for such runs).
"""

from __future__ import annotations

import copy
import gc
import itertools
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk.core.deadlines import DeadlineExceeded, deadline
from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.errors import WorkerTimeoutError
from hfsdk.core.workers.futures import LocalRef, wait_for_infos
from hfsdk.core.workers.host import Placement, RoleSpec, WorkerHost
from hfsdk.core.workers.resource_pool import DeviceSlot
from hfsdk.core.workers.worker_group import SharedHosts

logger = logging.getLogger(__name__)
_LOCAL_IDS = itertools.count(1_000_000)


def _logger_filters() -> dict[str, list[Any]]:
    """Every existing logger's filters (the root logger as ``""``)."""
    items = logging.Logger.manager.loggerDict.items()  # (it holds PlaceHolders too)
    loggers = {"": logging.getLogger(), **{n: i for n, i in items if isinstance(i, logging.Logger)}}
    return {name: list(item.filters) for name, item in loggers.items()}


def _restore_filters(saved: Mapping[str, list[Any]]) -> None:
    """Put back the filters of :func:`_logger_filters`; loggers made since get none."""
    for name, filters in _logger_filters().items():
        wanted = saved.get(name, [])
        if filters != wanted:
            logging.getLogger(name or None).filters = list(wanted)


def _restore_environment(saved: Mapping[str, str]) -> None:
    """Make ``os.environ`` equal ``saved`` again (added keys removed, changed ones reset)."""
    for key in [k for k in os.environ if k not in saved]:
        del os.environ[key]
    os.environ.update({key: value for key, value in saved.items() if os.environ.get(key) != value})


class LocalPool:
    """A one-device pool in the controller's process (no Ray placement group)."""

    def __init__(self, name: str = "local") -> None:
        self.name = name
        self.slots = [
            DeviceSlot(pg=None, bundle_index=0, node_id="local", node_ip="127.0.0.1", local_index=0)
        ]
        self.max_colocate = 1

    @property
    def world_size(self) -> int:
        """One rank."""
        return 1

    def __len__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return f"LocalPool({self.name!r}, in-process, 1 device)"

    def reserve(self, host_ids: Sequence[int], role: str) -> None:
        """Record the one host; a second is refused (one process holds every role)."""
        slot = self.slots[0]
        if slot.hosts:
            raise HfsdkError(
                f"the in-process pool {self.name!r} already holds roles; role {role!r} must be "
                "fused with them (placement.colocation: fused) or run with trainer.executor: ray"
            )
        slot.hosts.extend(host_ids)

    def unreserve(self, host_ids: Sequence[int]) -> None:
        """Forget the host."""
        slot = self.slots[0]
        slot.hosts = [h for h in slot.hosts if h not in host_ids]
        slot.last = None

    def release(self) -> None:
        """Nothing to give back."""


class LocalHostSet(SharedHosts):
    """The roles of a :class:`LocalPool`, built and called in this process.

    Sets the workers' environment (``env_vars``; ``OMP_NUM_THREADS`` also as
    torch's thread count) while it lives; :meth:`kill` drops the role objects
    and the process group and restores the controller's whole environment and
    logger filters as they were (also what the roles' engines changed). Each
    call is interrupted at ``call_timeout_s`` (see ``WorkerHost.execute``).
    """

    def __init__(
        self, pool: LocalPool, roles: Mapping[str, RoleSpec], *, name: str, options: Any
    ) -> None:
        import torch
        import torch.distributed as dist

        if options.init_distributed and dist.is_available() and dist.is_initialized():
            raise HfsdkError(
                "torch.distributed is already initialised in this process, so in-process "
                "workers cannot create their own group; set trainer.executor: ray"
            )
        self.pool = pool
        self.name = name
        self.roles = dict(roles)
        self.ids = [next(_LOCAL_IDS)]
        self.handles: list[Any] = []  # no Ray actors
        self._views = 0
        # Everything the roles may change in the shared process, put back by kill(): the
        # whole environment (ours, the rendezvous', what engines such as vLLM set) and
        # every logger's filters (engines quieten their libraries' loggers).
        self._saved_env = dict(os.environ)
        self._saved_filters = _logger_filters()
        self._saved_threads = torch.get_num_threads()
        # An engine may replace torch.set_num_threads process-wide (vLLM's CPU worker
        # makes it a no-op while its attention kernels run); put torch's own back too,
        # or the count below is never restored and a later engine aborts on it.
        self._saved_set_num_threads = torch.set_num_threads
        placement = Placement(
            rank=0, world_size=1, local_rank=0, local_world_size=1, node_ip="127.0.0.1"
        )
        self.host: WorkerHost | None = WorkerHost(placement, name)
        pool.reserve(self.ids, role=name)  # first: a refused role changes nothing in the process
        try:
            os.environ.update(options.env_vars)
            threads = options.env_vars.get("OMP_NUM_THREADS", "")
            if threads.isdigit() and int(threads) > 0:
                torch.set_num_threads(int(threads))
            limit = options.start_timeout_s
            try:
                with deadline(limit, f"role {name!r}: start-up is past {limit:g} s"):
                    info, status = self.host.setup_in_process(
                        self.roles,
                        options.init_distributed,
                        options.collective_timeout_s,
                        options.call_timeout_s,
                    )
            except DeadlineExceeded:
                raise WorkerTimeoutError(
                    f"role {name!r}: the in-process workers did not start within {limit:g} s "
                    "(trainer.startup_timeout_s)",
                    role=name,
                    ranks=[0],
                    method="__init__",
                ) from None
            wait_for_infos({0: LocalRef(status)}, role=name, method="__init__", timeout=None)
        except BaseException:
            self.kill()
            raise
        self.process_info = [info]

    def describe_rank(self, rank: int) -> str:
        """``rank 0 (in-process, pid 123)``."""
        return f"rank {rank} (in-process, pid {os.getpid()})"

    def prepare_calls(
        self, calls: Mapping[int, tuple[tuple[Any, ...], dict[str, Any]]]
    ) -> dict[int, tuple[tuple[Any, ...], dict[str, Any]]]:
        """The arguments as they are (nothing to share between processes)."""
        return dict(calls)

    def submit(
        self,
        rank: int,
        call: tuple[str, str, tuple[Any, ...], dict[str, Any], bool],
        after: Sequence[Any],
    ) -> tuple[LocalRef, LocalRef]:
        """Run the call now; its result and info as :class:`LocalRef` objects.

        Arguments and result are copied, as crossing a process boundary would
        copy them: a worker that changes its input, or keeps and later changes
        what it returned, affects the controller's objects no more than a Ray
        worker would.
        """
        if self.host is None:
            raise HfsdkError(f"the in-process workers of {self.name!r} were stopped")
        role, method, args, kwargs, want_result = call
        args, kwargs = copy.deepcopy((args, kwargs))
        result, info = self.host.execute(role, method, args, kwargs, want_result)
        return LocalRef(copy.deepcopy(result)), LocalRef(info)

    def ask_mesh_positions(self, role: str, mesh: str, timeout_s: float) -> list[Any]:
        """The role's declared position in ``mesh`` (``None``: undeclared)."""
        assert self.host is not None
        return [self.host.mesh_position(role, mesh)]

    def kill(self) -> None:
        """Drop the role objects and the process group; restore the controller's settings."""
        import torch
        import torch.distributed as dist

        if self.host is not None:
            distributed = self.host.distributed
            for role, worker in self.host.roles.items():
                try:
                    worker.close()
                except Exception:  # stopping must go on, and must not hide an earlier error
                    logger.warning("role %r: close() failed", role, exc_info=True)
            self.host.roles.clear()
            self.host = None
            # Engines drop their own subgroups when collected; only then the default group.
            gc.collect()
            if distributed and dist.is_initialized():
                dist.destroy_process_group()
            _restore_environment(self._saved_env)
            _restore_filters(self._saved_filters)
            torch.set_num_threads = self._saved_set_num_threads
            torch.set_num_threads(self._saved_threads)
        self.pool.unreserve(self.ids)
