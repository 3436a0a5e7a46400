"""Rank side of ``test_tp_rollout.py``: an FSDP2 actor generating at tensor-parallel size tg.

Each rank greedy-decodes its share of the prompts through
the ``hf`` rollout's shard path (the actor's :class:`SliceShards`), takes one ``update_actor`` step, decodes again, and
returns the responses, the slice exchange's counts, the weights' full shapes
and (rank 0) the updated full state dict.
"""

from __future__ import annotations

from typing import Any

import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.sharding import full_model_state
from hfsdk_backend_fsdp.tp_rollout import SliceShards, resolve_rollout_tp
from hfsdk_policy_losses.losses import reinforce_loss

TRAIN_KEYS = ["input_ids", "attention_mask", "position_ids", "responses", "response_mask"]


def run(
    rank: int, world: int, path: str, prompts: dict, tg: int, dtype: str = "float32"
) -> dict[str, Any]:
    """One rank of the scenario."""
    config = FSDPRoleConfig(
        model_path=path,
        device="cpu",
        dtype=dtype,  # type: ignore[arg-type]
        rollout_layout=RolloutLayoutConfig(tp=tg),
        mini_batch_size=len(prompts["input_ids"]),
        micro_batch_size=len(prompts["input_ids"]) // world,
        optim=OptimConfig(lr=0.02),
    )
    actor = ActorEngine(config, role="actor")
    model = actor.module.config.to_dict()
    assert resolve_rollout_tp(config.rollout_layout, world, model) == tg
    rollout = HFRollout(HFRolloutConfig(max_response_length=6), actor)
    assert isinstance(rollout.shards, SliceShards) and rollout.shards.tg == tg
    part = Batch.from_dict(tensors=prompts).chunk(world)[rank]
    first = rollout.generate_sequences(part, greedy=True)
    stats = rollout.shards.last_slices
    # One policy-gradient step away from the greedy responses (advantage -1): the
    # next greedy decoding must come from the new weights.
    train = first.select(tensor_keys=TRAIN_KEYS)
    mask = train["response_mask"]
    train["old_log_probs"] = torch.zeros_like(mask)
    train["advantages"] = -mask
    actor.update_actor(train, ActorObjective(policy_loss=reinforce_loss))
    second = rollout.generate_sequences(part, greedy=True)
    state = full_model_state(actor.module)  # collective; rank 0 gets it
    return {
        "first": first["responses"],
        "second": second["responses"],
        "metrics": first.meta["rollout_metrics"],
        "stats": stats,
        "second_stats": rollout.shards.last_slices,
        "shapes": {name: tuple(p.shape) for name, p in actor.module.named_parameters()},
        "state": state if rank == 0 else None,
    }


def run_many(rank: int, world: int, scenarios: list[dict]) -> list[dict[str, Any]]:
    """Several scenarios (keyword arguments of :func:`run`) in the same processes."""
    return [run(rank, world, **scenario) for scenario in scenarios]
