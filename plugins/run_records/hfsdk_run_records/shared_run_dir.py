"""Multi-node runs need the run directory on a filesystem every worker node sees.

Workers write their checkpoint shards straight into the run directory (rank 0
of each role writes its engine file), so on a node that does not see the
controller's run directory a checkpoint would land on that node's local disk
and a resume would miss it. :func:`check_run_dir_shared` writes a probe file
and asks a zero-CPU task pinned to each worker node to read it back; a node
that cannot is refused with one line before the first step writes anything
(the ``shared_run_dir`` step observer).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

from hfsdk import IN_PROCESS_NODE_ID, HfsdkError, StepObserver, StepView

PROBE_TIMEOUT_S = 60.0


def _read_probe(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _probe_nodes(path: Path, nodes: list[str], timeout_s: float) -> dict[str, str | None]:
    """What each node reads at ``path`` (``None``: nothing there)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0)(_read_probe)
    refs = [
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
            str(path)
        )
        for node in nodes
    ]
    try:
        values = ray.get(refs, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        raise HfsdkError(
            f"worker nodes did not answer whether they see the run directory within "
            f"{timeout_s:g} s; check that the nodes are alive"
        ) from None
    return dict(zip(nodes, values, strict=True))


def check_run_dir_shared(
    run_dir: Path, node_ids: Iterable[str], *, timeout_s: float = PROBE_TIMEOUT_S
) -> None:
    """Raise one line unless every node in ``node_ids`` sees ``run_dir`` as the controller does."""
    ray_nodes = set(node_ids) - {IN_PROCESS_NODE_ID}  # in-process workers share our filesystem
    if not ray_nodes:
        return
    import ray

    driver = ray.get_runtime_context().get_node_id()
    remote = sorted(ray_nodes - {driver})
    if not remote:
        return
    token = uuid.uuid4().hex
    probe = run_dir.resolve() / f".shared-fs-probe-{token[:8]}"
    probe.write_text(token)
    try:
        seen = _probe_nodes(probe, remote, timeout_s)
    finally:
        probe.unlink(missing_ok=True)
    blind = [node for node, value in seen.items() if value != token]
    if blind:
        raise HfsdkError(
            f"run directory {str(run_dir.resolve())!r} is not visible from worker node "
            f"{blind[0][:12]} ({len(blind)} of {len(remote)} remote nodes); checkpoints are "
            "written by the workers, so it must be on a filesystem shared by every node at the "
            "same path — mount one there, or run on a single node"
        )


class SharedRunDirCheck(StepObserver):
    """Runs :func:`check_run_dir_shared` over the run's worker nodes once, at its first step."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.checked = False

    def on_step_start(self, view: StepView) -> None:
        """The first step: check every node the roles' workers run on."""
        if not self.checked:
            groups = view.session.groups.values()
            check_run_dir_shared(
                self.run_dir, [i["node_id"] for g in groups for i in g.process_info]
            )
            self.checked = True


def shared_run_dir_observer(config: object, run_dir: Path) -> SharedRunDirCheck:
    """The ``shared_run_dir`` step observer's factory (every run)."""
    return SharedRunDirCheck(run_dir)
