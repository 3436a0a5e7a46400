"""Colocation on a local Ray instance: concurrency across pools, time-sharing within one.

A 4-device pool (``max_colocate=2``) is split into halves ``a`` and ``b``:
``actor`` runs on ``a``, ``critic`` on ``b``; ``reference`` joins ``a`` as a
separate process per device; finally ``policy`` + ``ref`` are fused into one
process per device of ``b``.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from hfsdk import BuiltinProtocol, ResourcePool, Worker, WorkerGroup, register
from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.colocation import colocate
from hfsdk.core.workers.ray_runtime import VIRTUAL_DEVICE_RESOURCE, connect, shutdown

pytestmark = pytest.mark.distributed


class NapWorker(Worker):
    def __init__(self, tag: str = "") -> None:
        super().__init__()
        self.tag = tag
        self.value: Any = None

    @register(protocol=BuiltinProtocol.ONE_TO_ALL, blocking=False)
    def nap(self, seconds: float) -> tuple[int, float, float]:
        start = time.time()
        time.sleep(seconds)
        return self.rank, start, time.time()

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def set_value(self, value: Any) -> None:
        self.value = value

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def state(self) -> tuple[str, str, Any, int]:
        return self.role, self.tag, self.value, os.getpid()

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def all_reduce(self, value: float) -> float:
        import torch.distributed as dist

        tensor = torch.tensor([value])
        dist.all_reduce(tensor)
        return float(tensor.item())


class RefWorker(NapWorker):
    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def ref_only(self) -> str:
        return f"ref-{self.rank}"


@pytest.fixture(scope="module")
def halves() -> Iterator[tuple[ResourcePool, ResourcePool]]:
    os.environ["OMP_NUM_THREADS"] = "1"
    connect(num_cpus=2, virtual_devices=4, object_store_memory=128 * 2**20)
    pool = ResourcePool(4, name="all", max_colocate=2)
    try:
        yield tuple(pool.split([2, 2], names=["a", "b"]))  # type: ignore[misc]
    finally:
        pool.release()
        shutdown()


@pytest.fixture(scope="module")
def actor(halves: tuple[ResourcePool, ResourcePool]) -> Iterator[WorkerGroup]:
    group = WorkerGroup(NapWorker, halves[0], role="actor")
    yield group
    group.shutdown()


@pytest.fixture(scope="module")
def critic(halves: tuple[ResourcePool, ResourcePool]) -> Iterator[WorkerGroup]:
    group = WorkerGroup(NapWorker, halves[1], role="critic")
    yield group
    group.shutdown()


def bundle_free(pool: ResourcePool, index: int, expected: float) -> float:
    """Free share of device ``index``'s bundle as Ray accounts it (polled: Ray's view lags)."""
    import ray

    slot = pool.slots[index]
    key = f"{VIRTUAL_DEVICE_RESOURCE}_group_{slot.bundle_index}_{slot.pg.id.hex()}"
    deadline = time.monotonic() + 10
    while True:
        free = ray.available_resources().get(key, 0.0)
        if free == expected or time.monotonic() > deadline:
            return free
        time.sleep(0.1)


def overlap(first: list[tuple[int, float, float]], second: list[tuple[int, float, float]]) -> bool:
    """Whether the two calls were running at the same moment on some pair of ranks."""
    return any(s1 < e2 and s2 < e1 for _, s1, e1 in first for _, s2, e2 in second)


def test_roles_on_different_pools_run_concurrently(actor: WorkerGroup, critic: WorkerGroup) -> None:
    start = time.monotonic()
    on_actor, on_critic = actor.nap(1.0), critic.nap(1.0)
    a, c = on_actor.result(), on_critic.result()
    wall = time.monotonic() - start
    assert overlap(a, c)
    assert wall < 1.9, f"two 1 s naps on separate pools took {wall:.2f} s"


def test_separate_processes_sharing_devices_run_one_after_another(
    halves: tuple[ResourcePool, ResourcePool], actor: WorkerGroup
) -> None:
    reference = WorkerGroup(NapWorker, halves[0], role="reference", kwargs={"tag": "ref"})
    try:
        # Two processes per device of half a: each holds half of its bundle.
        assert [bundle_free(halves[0], i, 0.0) for i in range(2)] == [0.0, 0.0]
        assert [bundle_free(halves[1], i, 0.5) for i in range(2)] == [0.5, 0.5]
        actor_pids = {s[3] for s in actor.state()}
        assert actor_pids.isdisjoint({s[3] for s in reference.state()})

        start = time.monotonic()
        on_actor, on_reference = actor.nap(1.0), reference.nap(1.0)
        a, r = on_actor.result(), on_reference.result()
        wall = time.monotonic() - start
        for rank in range(2):  # on each device the reference started after the actor ended
            assert r[rank][1] >= a[rank][2] - 0.01
        assert wall >= 2.0
        # A third separate process does not fit on a device (max_colocate=2): fails at once.
        with pytest.raises(HfsdkError, match="already holds 2 worker process"):
            WorkerGroup(NapWorker, halves[0], role="third")
    finally:
        del reference  # dropped without shutdown(): its finalizer stops the processes
        gc.collect()
    assert [bundle_free(halves[0], i, 0.5) for i in range(2)] == [0.5, 0.5]
    assert [len(slot.hosts) for slot in halves[0].slots] == [1, 1]


def test_fused_roles_share_one_process_per_device_with_state_kept_apart(
    halves: tuple[ResourcePool, ResourcePool], critic: WorkerGroup
) -> None:
    groups = colocate(halves[1], {"policy": NapWorker, "ref": (RefWorker, {"tag": "frozen"})})
    policy, ref = groups["policy"], groups["ref"]
    try:
        assert [i["pid"] for i in policy.process_info] == [i["pid"] for i in ref.process_info]
        assert not hasattr(policy, "ref_only")
        assert ref.ref_only() == ["ref-0", "ref-1"]
        policy.set_value(1)
        ref.set_value(2)
        assert [s[:3] for s in policy.state()] == [("policy", "", 1)] * 2
        assert [s[:3] for s in ref.state()] == [("ref", "frozen", 2)] * 2
        # Both roles use the process's torch.distributed group.
        assert policy.all_reduce(1.0) == [2.0, 2.0]
        assert ref.all_reduce(2.0) == [4.0, 4.0]

        start = time.monotonic()
        on_policy, on_ref = policy.nap(1.0), ref.nap(1.0)
        p, r = on_policy.result(), on_ref.result()
        for rank in range(2):  # one process per device: its two naps never overlap
            assert not overlap([p[rank]], [r[rank]])
        assert time.monotonic() - start >= 2.0
    finally:
        policy.shutdown()
        assert ref.ref_only() == ["ref-0", "ref-1"]  # processes live while a role uses them
        ref.shutdown()
    assert [bundle_free(halves[1], i, 0.5) for i in range(2)] == [0.5, 0.5]
