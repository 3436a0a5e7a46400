"""Worker base class outside a group: context defaults, subclass constructors, meshes."""

from __future__ import annotations

import attrs
import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.mesh import MeshPosition
from hfsdk.core.workers.worker import Worker, WorkerContext, active_context


@attrs.frozen(kw_only=True)
class _Config:
    lr: float = 0.1


class ConfiguredWorker(Worker):
    def __init__(self, config: _Config, *, name: str = "x") -> None:
        super().__init__()
        self.config = config
        self.name = name


class NoSuperWorker(Worker):
    def __init__(self, value: int) -> None:  # forgets super().__init__() on purpose
        self.value = value


def test_outside_a_group_a_worker_is_rank_zero_of_one_on_cpu() -> None:
    worker = ConfiguredWorker(_Config(lr=0.5), name="y")
    assert (worker.rank, worker.world_size, worker.local_rank, worker.role) == (0, 1, 0, "worker")
    assert worker.config.lr == 0.5 and worker.name == "y"
    assert str(worker.device) == "cpu"
    assert worker.process_group is None


def test_context_is_attached_before_init_even_without_super() -> None:
    context = WorkerContext(role="critic", rank=3, world_size=4, local_rank=1, local_world_size=2)
    with active_context(context):
        worker = NoSuperWorker(7)
    assert (worker.role, worker.rank, worker.world_size, worker.local_rank) == ("critic", 3, 4, 1)
    assert worker.value == 7
    # The context only applies inside the block.
    assert NoSuperWorker(1).rank == 0


def test_declare_mesh_uses_the_rank_and_checks_the_product() -> None:
    with active_context(WorkerContext(rank=5, world_size=8)):
        worker = ConfiguredWorker(_Config())
    position = worker.declare_mesh("train", pp=2, tp=2)
    assert position == MeshPosition.from_rank(5, pp=2, tp=2, dp=2)
    assert (position.pp_rank, position.dp_rank, position.tp_rank) == (1, 0, 1)
    assert worker.mesh_position("train") == position
    assert worker.mesh_position("other") is None
    with pytest.raises(HfsdkError, match="does not cover the group's 8 ranks"):
        worker.declare_mesh("bad", pp=3, tp=1)


def test_device_mesh_needs_torch_distributed() -> None:
    with pytest.raises(HfsdkError, match="init_distributed=True"):
        ConfiguredWorker(_Config()).device_mesh((1,), ("dp",))


def test_the_building_context_belongs_to_the_block_that_builds() -> None:
    """No process-wide state: a worker built in another thread meanwhile gets no context."""
    import threading

    seen: dict[str, WorkerContext] = {}
    inside, done = threading.Event(), threading.Event()

    def elsewhere() -> None:
        inside.wait(timeout=30)
        seen["elsewhere"] = NoSuperWorker(1)._hfsdk_context
        done.set()

    thread = threading.Thread(target=elsewhere)
    thread.start()
    with active_context(WorkerContext(rank=3, world_size=4)):
        seen["here"] = NoSuperWorker(0)._hfsdk_context
        inside.set()
        done.wait(timeout=30)
    thread.join(timeout=30)
    assert (seen["here"].rank, seen["here"].world_size) == (3, 4)
    assert (seen["elsewhere"].rank, seen["elsewhere"].world_size) == (0, 1)
