"""The :class:`Worker` base class: one rank of a role's SPMD group."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.mesh import MeshPosition

if TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup
    from torch.distributed.device_mesh import DeviceMesh


@attrs.frozen(kw_only=True)
class WorkerContext:
    """What a worker knows about its place in the group (set by the worker host)."""

    role: str = "worker"
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_ip: str = "127.0.0.1"
    device: str = "cpu"
    distributed: bool = False
    master_addr: str | None = None
    master_port: int | None = None


# Scoped to the block that builds the worker (its thread or task), not to the process.
_BUILDING: ContextVar[WorkerContext | None] = ContextVar("hfsdk_worker_context", default=None)


@contextmanager
def active_context(context: WorkerContext) -> Iterator[None]:
    """Make ``context`` the one every :class:`Worker` built inside the block receives."""
    token = _BUILDING.set(context)
    try:
        yield
    finally:
        _BUILDING.reset(token)


class Worker:
    """Base class of a role's worker: one rank of an SPMD group running in a Ray actor.

    Subclass it, decorate the methods the controller may call with
    :func:`~hfsdk.core.workers.register`, and build a
    :class:`~hfsdk.core.workers.WorkerGroup` from the class::

        class ActorWorker(Worker):
            def __init__(self, config: ActorConfig) -> None:
                super().__init__()
                self.config = config          # any constructor arguments are fine

            @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
            def compute_log_prob(self, batch: Batch) -> Batch: ...

        group = WorkerGroup(ActorWorker, pool, role="actor", kwargs={"config": cfg})

    Constructor arguments come from the group's ``args``/``kwargs`` and must
    pickle. Rank, world size, local rank, device and the role name are set
    before ``__init__`` runs (even if a subclass forgets ``super().__init__()``),
    and ``torch.distributed`` is already initialised (gloo on CPU, NCCL plus
    gloo on GPU) over the whole group, so ``__init__`` may build FSDP2 models or
    device meshes over :attr:`process_group`. Outside a worker group (a unit
    test) a worker is rank 0 of 1 on the CPU without ``torch.distributed``.

    Mesh protocols read each rank's position in a named mesh: call
    :meth:`declare_mesh` (or :meth:`set_mesh_position`) in ``__init__`` or in
    any method that runs before the first mesh-protocol call.
    """

    _hfsdk_context: WorkerContext
    _hfsdk_meshes: dict[str, MeshPosition]

    def __new__(cls, *args: Any, **kwargs: Any) -> Worker:
        """Attach the worker context before any subclass ``__init__`` runs."""
        self = super().__new__(cls)
        self._hfsdk_context = _BUILDING.get() or WorkerContext()
        self._hfsdk_meshes = {}
        return self

    def __init__(self) -> None:
        """Nothing to do; the context is attached in ``__new__``."""

    # ------------------------------------------------------------------ identity

    @property
    def context(self) -> WorkerContext:
        """Everything the host told this worker (role, ranks, device, master endpoint)."""
        return self._hfsdk_context

    @property
    def role(self) -> str:
        """The role name this worker serves (``actor``, ``critic``, ...)."""
        return self._hfsdk_context.role

    @property
    def rank(self) -> int:
        """Global rank in the group (and in its torch.distributed world)."""
        return self._hfsdk_context.rank

    @property
    def world_size(self) -> int:
        """Number of ranks in the group."""
        return self._hfsdk_context.world_size

    @property
    def local_rank(self) -> int:
        """Rank among this group's workers on the same node."""
        return self._hfsdk_context.local_rank

    @property
    def local_world_size(self) -> int:
        """Number of this group's workers on the same node."""
        return self._hfsdk_context.local_world_size

    @property
    def device(self) -> torch.device:
        """The device this rank computes on (``cuda:0`` under Ray's GPU isolation, or cpu)."""
        import torch

        return torch.device(self._hfsdk_context.device)

    @property
    def process_group(self) -> ProcessGroup | None:
        """The torch.distributed group spanning all ranks (``None`` when not initialised)."""
        if not self._hfsdk_context.distributed:
            return None
        import torch.distributed as dist

        return dist.group.WORLD

    def device_mesh(self, shape: Sequence[int], dim_names: Sequence[str]) -> DeviceMesh:
        """A torch ``DeviceMesh`` over the group's ranks (e.g. for FSDP2 ``fully_shard``)."""
        if not self._hfsdk_context.distributed:
            raise HfsdkError(
                "device_mesh() needs torch.distributed; build the WorkerGroup with "
                "init_distributed=True (the default)"
            )
        from torch.distributed.device_mesh import init_device_mesh

        return init_device_mesh(self.device.type, tuple(shape), mesh_dim_names=tuple(dim_names))

    # ------------------------------------------------------------------ meshes

    def declare_mesh(
        self, name: str, *, pp: int = 1, tp: int = 1, dp: int | None = None
    ) -> MeshPosition:
        """Declare this rank's place in mesh ``name`` of shape (pp, dp, tp), tp fastest.

        ``dp`` defaults to ``world_size // (pp * tp)``; the product must equal the
        world size. Returns the position (also used by ``MESH_PROTO``).
        """
        if dp is None:
            dp = self.world_size // (pp * tp) if pp * tp else 0
        if pp * tp * dp != self.world_size or dp < 1:
            raise HfsdkError(
                f"mesh {name!r}: pp={pp} x tp={tp} x dp={dp} does not cover the group's "
                f"{self.world_size} ranks; choose sizes whose product is {self.world_size}"
            )
        position = MeshPosition.from_rank(self.rank, pp=pp, tp=tp, dp=dp)
        self._hfsdk_meshes[name] = position
        return position

    def set_mesh_position(self, name: str, position: MeshPosition) -> None:
        """Declare an explicit position in mesh ``name`` (for layouts other than pp-dp-tp)."""
        if not isinstance(position, MeshPosition):
            raise HfsdkError(f"set_mesh_position({name!r}, ...) needs a MeshPosition")
        self._hfsdk_meshes[name] = position

    def mesh_position(self, name: str) -> MeshPosition | None:
        """This rank's position in mesh ``name``, or ``None`` if it was not declared."""
        return self._hfsdk_meshes.get(name)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Release what outlives the Python object (an engine's process groups, threads).

        Called when in-process workers stop (``trainer.executor: local``), before
        the process group is destroyed; a Ray worker's process is killed instead.
        The default does nothing.
        """
