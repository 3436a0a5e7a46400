"""Resource pools on a local Ray instance with 4 virtual devices (no worker processes).

Also covers ``connect()`` on a local start: virtual devices, no dashboard, idempotence.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from hfsdk import ResourcePool
from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.errors import InfeasibleResourcesError, ResourceTimeoutError
from hfsdk.core.workers.ray_runtime import VIRTUAL_DEVICE_RESOURCE, connect, shutdown

pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module", autouse=True)
def ray_runtime() -> Iterator[None]:
    os.environ["OMP_NUM_THREADS"] = "1"
    connect(num_cpus=2, virtual_devices=4, object_store_memory=128 * 2**20)
    try:
        yield
    finally:
        shutdown()


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


def test_connect_started_a_quiet_local_instance_with_virtual_devices() -> None:
    import ray

    info = connect()  # idempotent: returns the running instance
    assert info.started_locally
    assert (info.device_resource, info.devices, info.cpus) == (VIRTUAL_DEVICE_RESOURCE, 4.0, 2.0)
    # No dashboard was started (Ray records an empty web UI address).
    assert not ray._private.worker.global_worker.node.address_info.get("webui_url")
    with pytest.raises(HfsdkError, match="already connected to Ray"):
        connect("10.1.2.3:6379")


def test_infeasible_pool_fails_at_once_with_both_numbers() -> None:
    start = time.monotonic()
    with pytest.raises(InfeasibleResourcesError) as info:
        ResourcePool(8, name="huge")
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert "asks for 8 devices (8 per node x 1 node)" in message
    assert "the cluster has 4" in message
    with pytest.raises(InfeasibleResourcesError, match=r"asks for 6 devices .* has 4"):
        ResourcePool(2, nodes=3)


def test_busy_devices_time_out_then_free_up_after_release() -> None:
    holder = ResourcePool(4, name="holder")
    try:
        with pytest.raises(ResourceTimeoutError, match="0 of 4 'hfsdk_device' are free"):
            ResourcePool(2, name="late", timeout_s=1.0)
    finally:
        holder.release()
    with ResourcePool(2, name="now") as pool:
        assert pool.world_size == 2


def test_ranks_follow_bundle_order_on_one_node() -> None:
    with ResourcePool(4, name="ordered") as pool:
        assert [s.bundle_index for s in pool.slots] == [0, 1, 2, 3]
        assert [s.local_index for s in pool.slots] == [0, 1, 2, 3]
        assert len({s.node_id for s in pool.slots}) == 1
        assert bundle_free(pool, 3, 1.0) == 1.0


def test_split_and_merge_share_the_placement_groups() -> None:
    with ResourcePool(4, name="whole", max_colocate=2) as pool:
        first, second = pool.split([1, 3], names=["a", "b"])
        assert (first.name, first.world_size, second.world_size) == ("a", 1, 3)
        assert [s.bundle_index for s in second.slots] == [1, 2, 3]
        merged = ResourcePool.merge([second, first])
        assert [s.bundle_index for s in merged.slots] == [1, 2, 3, 0]
        assert merged.max_colocate == 2
        with pytest.raises(HfsdkError, match="they share devices"):
            ResourcePool.merge([pool, first])
        with pytest.raises(HfsdkError, match="add up to 4"):
            pool.split([2, 3])
        with pytest.raises(HfsdkError, match="release the pool 'whole'"):
            first.release()
    with pytest.raises(HfsdkError, match="was released"):
        first.actor_options(0)


def test_actor_options_give_each_process_its_share_of_one_bundle() -> None:
    with ResourcePool(2, name="shared", max_colocate=4) as pool:
        options = pool.actor_options(1)
        assert options["resources"] == {VIRTUAL_DEVICE_RESOURCE: 0.25}
        strategy = options["scheduling_strategy"]
        assert strategy.placement_group_bundle_index == 1
        assert strategy.placement_group is pool.slots[1].pg


def test_reserving_more_processes_than_max_colocate_fails_fast() -> None:
    with ResourcePool(2, name="tight", max_colocate=2) as pool:
        pool.reserve([1, 2], role="actor")
        pool.reserve([3, 4], role="critic")
        with pytest.raises(HfsdkError, match="max_colocate=3, or fuse the roles"):
            pool.reserve([5, 6], role="reference")
        pool.unreserve([3, 4])
        pool.reserve([5, 6], role="reference")
        assert [s.hosts for s in pool.slots] == [[1, 5], [2, 6]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"devices_per_node": 0}, "devices_per_node=0"),
        ({"nodes": 1.5}, "nodes=1.5"),
        ({"max_colocate": 0}, "max_colocate=0"),
        ({"timeout_s": 0}, "timeout_s=0"),
    ],
)
def test_bad_pool_arguments_are_explained(kwargs: dict, message: str) -> None:
    with pytest.raises(HfsdkError, match=message):
        ResourcePool(**kwargs)
