"""Two Ray nodes (``ray.cluster_utils.Cluster``) with 2 virtual devices each.

The driver joins through ``RAY_ADDRESS``, as a user joining a cluster would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from hfsdk import BuiltinProtocol, ResourcePool, Worker, WorkerGroup, register
from hfsdk.core.workers.errors import InfeasibleResourcesError, WorkerDiedError
from hfsdk.core.workers.ray_runtime import (
    VIRTUAL_DEVICE_RESOURCE,
    connect,
    health_check_config,
    shutdown,
)

pytestmark = pytest.mark.distributed


class NodeWorker(Worker):
    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def where(self) -> tuple[int, int, int, str]:
        import ray

        return (
            self.rank,
            self.local_rank,
            self.local_world_size,
            ray.get_runtime_context().get_node_id(),
        )

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def all_reduce(self) -> list[float]:
        import torch.distributed as dist

        tensor = torch.tensor([float(self.rank + 1), float(10 * self.rank)])
        dist.all_reduce(tensor)
        return tensor.tolist()

    @register(protocol=BuiltinProtocol.ONE_TO_ALL, blocking=False)
    def sleep(self, seconds: float) -> int:
        time.sleep(seconds)
        return self.rank


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    os.environ["OMP_NUM_THREADS"] = "1"
    node_args: dict[str, Any] = {
        "num_cpus": 1,
        "resources": {VIRTUAL_DEVICE_RESOURCE: 2},
        "object_store_memory": 96 * 2**20,
    }
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**node_args, "_system_config": health_check_config(5.0)},
    )
    cluster.add_node(**node_args)
    cluster.wait_for_nodes()
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = cluster.address
    try:
        info = connect()  # joins through RAY_ADDRESS
        assert not info.started_locally
        assert info.devices == 4.0
        yield cluster
    finally:
        shutdown()
        cluster.shutdown()
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous


def test_pool_spans_nodes_in_a_stable_order_and_gloo_works_across_them(cluster: Any) -> None:
    import ray

    driver_node = ray.get_runtime_context().get_node_id()
    pool = ResourcePool(2, nodes=2, name="two-nodes")
    group = WorkerGroup(NodeWorker, pool, role="actor")
    try:
        where = group.where()
        nodes = [w[3] for w in where]
        assert nodes[0] == nodes[1] == driver_node  # ranks 0-1 on the first (driver's) node
        assert nodes[2] == nodes[3] != driver_node
        assert [(w[1], w[2]) for w in where] == [(0, 2), (1, 2), (0, 2), (1, 2)]
        assert [s.node_id for s in pool.slots] == nodes
        # Sum over ranks of (rank + 1, 10 * rank) = (10, 60) on every rank.
        assert group.all_reduce() == [[10.0, 60.0]] * 4
    finally:
        group.shutdown()
        pool.release()
    # The same request gets the same node order again.
    with ResourcePool(2, nodes=2, name="again") as again:
        assert [s.node_id for s in again.slots] == nodes


def test_no_single_node_can_hold_four_devices(cluster: Any) -> None:
    with pytest.raises(InfeasibleResourcesError) as info:
        ResourcePool(4, name="too-wide")
    message = str(info.value)
    assert "asks for 4 devices (4 per node x 1 node)" in message
    assert "the cluster has 4" in message and message.count(": 2") == 2


def test_losing_a_node_is_reported_as_dead_workers(cluster: Any) -> None:
    pool = ResourcePool(2, nodes=2, name="doomed")
    group = WorkerGroup(NodeWorker, pool, role="rollout", init_distributed=False)
    try:
        future = group.sleep(30.0)
        worker_node = next(n for n in cluster.list_all_nodes() if n is not cluster.head_node)
        start = time.monotonic()
        cluster.remove_node(worker_node)
        with pytest.raises(WorkerDiedError) as info:
            future.result(timeout=60)
        assert time.monotonic() - start < 30
        assert info.value.role == "rollout"
        assert info.value.rank in (2, 3)  # the ranks on the removed node
    finally:
        group.shutdown()
        pool.release()
