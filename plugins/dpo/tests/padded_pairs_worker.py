"""One rank of the padded-pair check in ``test_padded_pairs.py`` (run by ``run_gloo``).

Splits the pair batch with the training dispatch (3 pairs over 4 ranks: the last rank
holds only a padding pair), runs the dpo updates and returns each update's metrics and,
on rank 0, the trained weights.
"""

from __future__ import annotations

from typing import Any

import torch

from hfsdk import ROW_GROUP, Batch
from hfsdk.core.workers.protocols import DispatchContext, dispatch_dp_compute_train
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_dpo.losses import DPOLossConfig, dpo_loss


def train(rank: int, world: int, inputs: dict[str, Any]) -> dict[str, Any]:
    """This rank's part of ``inputs['steps']`` dpo updates: metrics, rows, weights."""
    torch.manual_seed(0)
    config = FSDPRoleConfig(**inputs["config"], shuffle=False, optim=OptimConfig(lr=1e-2))
    actor = ActorEngine(config, role="actor")
    batch = Batch.from_dict(tensors=inputs["batch"], meta={ROW_GROUP: 2})
    ctx = DispatchContext(role="actor", method="update_actor", protocol="train", world_size=world)
    (piece,), _ = dispatch_dp_compute_train(ctx, (batch,), {}).calls[rank]
    objective = ActorObjective(policy_loss=dpo_loss, policy_loss_config=DPOLossConfig(beta=0.5))
    metrics = [actor.update_actor(piece, objective) for _ in range(inputs["steps"])]
    weights = actor.state_dict()["model"]  # collective: every rank calls it
    return {"metrics": metrics, "rows": len(piece), "weights": weights if rank == 0 else None}
