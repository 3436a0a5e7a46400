"""One rank of the padded-pair check in ``test_padded_pairs.py`` (run as a script).

Joins a gloo group (``--rank R --world W --port P --inputs FILE --out DIR``), splits the
saved pair batch with the training dispatch (3 pairs over 4 ranks: the last rank holds
only a padding pair), runs the dpo update and writes each update's metrics and, on
rank 0, the trained weights to ``DIR/rankR.pt``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from hfsdk import ROW_GROUP, Batch
from hfsdk.core.workers.protocols import DispatchContext, dispatch_dp_compute_train
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_dpo.losses import DPOLossConfig, dpo_loss


def train(inputs: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
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


def main() -> None:
    """Run one rank."""
    parser = argparse.ArgumentParser()
    for name in ("--rank", "--world", "--port"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=args.world
    )
    out = train(torch.load(args.inputs, weights_only=False), args.rank, args.world)
    torch.save(out, args.out / f"rank{args.rank}.pt")
    # Every rank done before any tears down: rank 0 hosts the store the others still use.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
