"""A node lost mid-run (``ray.cluster_utils.Cluster``): reported, restarted on what is left.

A head node without devices (the driver's) and two worker nodes with one
virtual device each. The default run's one-device pool lands on one of them;
at the start of step 3 (after step 2's checkpoint) that node is removed. The
trainer must report the dead worker, start the workers again on the other
node, resume from step_2 and finish; with no node left to hold the pool, the
restart stops with one line naming what it asked for.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.trainer import Trainer
from hfsdk.core.workers.ray_runtime import VIRTUAL_DEVICE_RESOURCE, health_check_config, shutdown
from hfsdk_faults import faults as faults_module

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.heavy]

ARGS = ["trainer.total_steps=4", "trainer.save_every=2", "trainer.executor=ray",
        "trainer.startup_timeout_s=300"]  # fmt: skip


@pytest.fixture
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    shutdown()  # a Ray instance an earlier test left running would refuse the cluster's address
    os.environ["OMP_NUM_THREADS"] = "1"
    memory = {"object_store_memory": 96 * 2**20}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, **memory, "_system_config": health_check_config(5.0)},
    )
    for _ in range(2):
        cluster.add_node(num_cpus=1, resources={VIRTUAL_DEVICE_RESOURCE: 1}, **memory)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        shutdown()
        cluster.shutdown()


def _node_of(cluster: Any, pid: int) -> Any:
    """The cluster node whose raylet started process ``pid``."""
    import psutil
    from ray._private import ray_constants

    parents = {p.pid for p in psutil.Process(pid).parents()}
    for node in cluster.list_all_nodes():
        raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process
        if raylet.pid in parents:
            return node
    raise AssertionError(f"no node started pid {pid}")


def _remove_at(cluster: Any, step: int, removed: list[Any]) -> Callable[..., None]:
    def remove(at: int, pid: Callable[[], int], point: str = "worker_kill") -> None:
        if at == step and point == "worker_kill" and not removed:
            node = _node_of(cluster, pid())
            removed.append(node)
            cluster.remove_node(node)

    return remove


def test_a_lost_node_is_reported_and_the_run_restarts_on_the_other(
    cluster: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    removed: list[Any] = []
    # The worker_kill fault point (a step observer) removes the node instead of killing.
    monkeypatch.setenv(faults_module.FAULT_ENV, "worker_kill:3")
    monkeypatch.setattr(faults_module, "maybe_kill_worker", _remove_at(cluster, 3, removed))
    config = load_run_config("grpo", None, [*ARGS, f"trainer.ray_address={cluster.address}"])
    trainer = Trainer(config, tmp_path / "run", quiet=True)
    with caplog.at_level(logging.WARNING, logger="hfsdk.core.trainer.trainer"):
        metrics = trainer.fit()
    assert removed and trainer.restarts == 1
    assert trainer.resume_from is not None and trainer.resume_from[0] == 2
    assert [row["step"] for row in metrics] == [1, 2, 3, 4]
    report = [r.getMessage() for r in caplog.records if "worker failure" in r.getMessage()]
    assert len(report) == 1 and "role 'actor' rank 0 (pid" in report[0], report
    assert "died during method" in report[0] or "did not finish" in report[0], report


def test_with_no_node_left_for_the_pool_the_restart_stops_with_one_line(
    cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    others = [n for n in cluster.list_all_nodes() if n is not cluster.head_node]
    cluster.remove_node(others[0])  # one device node left: the one the run will lose
    removed: list[Any] = []
    # The worker_kill fault point (a step observer) removes the node instead of killing.
    monkeypatch.setenv(faults_module.FAULT_ENV, "worker_kill:3")
    monkeypatch.setattr(faults_module, "maybe_kill_worker", _remove_at(cluster, 3, removed))
    config = load_run_config(
        "grpo", None, [*ARGS, f"trainer.ray_address={cluster.address}", "trainer.max_restarts=1"]
    )
    with pytest.raises(HfsdkError) as info:
        Trainer(config, tmp_path / "run", quiet=True).fit()
    assert removed
    message = str(info.value)
    assert "\n" not in message.strip() and VIRTUAL_DEVICE_RESOURCE in message, message
