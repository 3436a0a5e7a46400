"""The ``shared_run_dir`` check on two Ray nodes (``ray.cluster_utils.Cluster``, one machine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hfsdk import HfsdkError
from hfsdk.core.workers.ray_runtime import connect, shutdown
from hfsdk_run_records import shared_run_dir

pytestmark = pytest.mark.distributed


@pytest.fixture
def two_nodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    import ray
    from ray.cluster_utils import Cluster

    shutdown()  # a Ray instance an earlier test left running would refuse the address
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    try:
        connect()
        yield [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    finally:
        shutdown()
        cluster.shutdown()


def test_the_run_dir_must_be_visible_from_every_worker_node(
    two_nodes: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(two_nodes) == 2
    shared_run_dir.check_run_dir_shared(tmp_path, two_nodes)  # one machine: it is shared
    assert list(tmp_path.iterdir()) == []  # the probe is gone
    # A node with its own disk reads nothing at the probe's path.
    blind: Any = lambda path, remote, timeout_s: dict.fromkeys(remote)  # noqa: E731
    monkeypatch.setattr(shared_run_dir, "_probe_nodes", blind)
    with pytest.raises(HfsdkError, match=r"not visible from worker node .* \(1 of 1 remote"):
        shared_run_dir.check_run_dir_shared(tmp_path, two_nodes)
