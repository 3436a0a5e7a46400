"""One rank of a tp-2 or pp-2 rollout replica (test helper run by ``run_gloo``): decode, sync,
decode."""

from __future__ import annotations

from typing import Any

import torch

from hfsdk import Batch, DataParallelInfo, build_rollout
from hfsdk.core.config import load_run_config
from hfsdk_backend_common.rollout.tp_replica import TPReplicaSource
from hfsdk_backend_common.weight_sync import WeightSyncGroup, receive_stream


def replica_rank(
    rank: int, world: int, *, model: str, endpoint: Any, prompts: dict, width: int, pg: int = 1
) -> dict[str, Any]:
    """Greedy responses before and after a weight sync, and the replica's log-probs after it
    (one replica of ``pg`` stages of ``world / pg`` tensor ranks)."""
    config = load_run_config("grpo", None, [f"rollout.max_response_length={width}"]).rollout
    source = TPReplicaSource(
        model, model, device=torch.device("cpu"), dtype=torch.float32,
        dp=DataParallelInfo(size=world, rank=rank), tg=world // pg, pg=pg, rank=rank,
        world=world,
    )  # fmt: skip
    rollout = build_rollout(config, source)
    half = len(prompts["input_ids"]) // world  # this rank's share, as DP_COMPUTE_PROTO splits
    mine = {k: v[rank * half : (rank + 1) * half] for k, v in prompts.items()}
    before = rollout.generate_sequences(Batch.from_dict(tensors=mine), n=1, greedy=True)
    group = WeightSyncGroup(endpoint, 1 + rank, timeout_s=60)
    receiver = source.receiver()
    metrics = receive_stream(group, receiver.accept)
    rollout.update_weights(source)
    after = rollout.generate_sequences(Batch.from_dict(tensors=mine), n=1, greedy=True)
    keys = ("input_ids", "attention_mask", "position_ids", "responses", "response_mask")
    return {
        "before": before["responses"],
        "after": {k: after[k] for k in keys},
        "log_probs": source.log_probs(after),
        "missing": receiver.missing(),
        "bytes": metrics["sync/bytes"],
        "held": sorted(source.shards.slices),
    }


def refusals(rank: int, world: int, *, model: str) -> list[str]:
    """What a tp replica says to a rollout asking for full weights, and whether the
    ``transformers`` decoder took its shards."""
    from hfsdk import HfsdkError

    source = TPReplicaSource(
        model, model, device=torch.device("cpu"), dtype=torch.float32,
        dp=DataParallelInfo(size=world, rank=rank), tg=world, rank=rank, world=world,
    )  # fmt: skip
    messages = []
    for ask in (
        lambda: next(iter(source.hf_weights())),
        lambda: source.live_hf_module().__enter__(),
    ):
        try:
            ask()
        except HfsdkError as error:
            messages.append(str(error))
    config = load_run_config("grpo", None, ["rollout.decoder=transformers"]).rollout
    build_rollout(config, source)
    messages.append(f"taken={source.shards_taken}")
    return messages
