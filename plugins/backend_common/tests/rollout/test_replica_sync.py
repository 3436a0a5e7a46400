"""A replica's verified sync covers a rollout that keeps its own copy of the weights (vLLM)."""

from __future__ import annotations

import copy
import threading
from typing import Any

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.run_assets import resolve_assets
from hfsdk_backend_common import WeightSyncMismatch
from hfsdk_backend_common.rollout.replica import RolloutReplicaWorker
from hfsdk_backend_common.weight_sync import WeightSyncGroup, open_store, send_weights


class _CopyThatLosesATensor:
    """A rollout with its own weights whose reload read-back finds a tensor missing (what
    the vLLM rollout raises when its engine does not hold what was streamed in)."""

    def __init__(self) -> None:
        self.reloads: list[int] = []

    def update_weights(self, actor: Any) -> None:
        self.reloads.append(actor.weights_version)
        raise WeightSyncMismatch(
            f"the vLLM engine does not hold the actor's weights version {actor.weights_version}"
            " after reloading them: 1 of 15 tensor(s) differ from what was sent"
        )

    def close(self) -> None:
        """Nothing to release."""


def _sync_into(replica: RolloutReplicaWorker) -> dict[str, Any]:
    store, endpoint = open_store("127.0.0.1", world_size=2, timeout_s=60)
    results: dict[str, Any] = {}

    def receive() -> None:
        replica.sync_group = WeightSyncGroup(endpoint, 1, timeout_s=60)
        results["received"] = replica.receive_weights()

    thread = threading.Thread(target=receive)
    thread.start()
    sender = copy.deepcopy(replica.source.module)
    group = WeightSyncGroup(endpoint, 0, store=store, timeout_s=60)
    send_weights(group, sender.named_parameters(), version=3)
    thread.join(timeout=60)
    assert not thread.is_alive()
    return results["received"]


def test_a_rollout_copy_that_fails_its_read_back_fails_the_replicas_sync() -> None:
    """The stream arrives whole, but the rollout's own copy (a vLLM engine) does not hold it:
    the sync is not verified, ``sync/mismatch`` carries the rollout's line (the controller
    restarts the replica with it) and the replica keeps reporting its last verified version."""
    config = load_run_config("grpo", None, ["rollout.max_response_length=4"])
    replica = RolloutReplicaWorker(
        role="rollout", config=config, assets=resolve_assets(config, "actor"),
        section=config.actor,
    )  # fmt: skip
    replica.rollout = _CopyThatLosesATensor()  # type: ignore[assignment]
    received = _sync_into(replica)
    assert "sync/verified" not in received
    line = received["sync/mismatch"]
    assert line.startswith("weights version 3 on replica rank 0: the vLLM engine does not hold")
    assert "1 of 15 tensor(s) differ" in line and "\n" not in line
    assert replica.rollout.reloads == [1] and replica.synced_version == -1
