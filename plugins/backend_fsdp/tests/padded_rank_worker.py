"""One rank of the padded-batch training check in ``test_padding_rows.py`` (run as a script).

Splits the shared batch with a training protocol's dispatch (as the worker
group would: here 6 rows over 4 ranks, so the last rank holds only padding),
runs ``update_actor`` with a zero learning rate (the weights stay put, so
several updates can be compared) and writes the full gradient (rank 0) and
the rank's metrics of each update to ``--out``.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
import torch.distributed as dist
from gloo_ranks import join_group  # beside this script, on its sys.path

from hfsdk.core.batch import Batch
from hfsdk.core.workers.protocols import (
    DispatchContext,
    dispatch_dp_compute_proto,
    dispatch_dp_compute_train,
)
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.micro_batches import token_budget_groups
from hfsdk_policy_losses.losses import ppo_clip_loss


class GradientRecorder(ActorEngine):
    """An actor that keeps the full gradient of its last optimizer step and never moves.

    Its learning rate is 0 (the config refuses 0, so it is set on the
    optimizer), so several updates start from the same weights.
    """

    last_gradient: dict[str, torch.Tensor]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        assert self.optimizer is not None and self.scheduler is not None
        for group in self.optimizer.param_groups:
            group["lr"] = 0.0
        self.scheduler.base_lrs = [0.0 for _ in self.scheduler.base_lrs]

    def _optimizer_step(self, metrics: Any, prefix: str) -> None:
        gradient = {}
        for name, param in self.module.named_parameters():
            grad = param.grad
            if grad is not None and hasattr(grad, "full_tensor"):
                grad = grad.full_tensor()  # collective: every rank calls it
            gradient[name] = torch.zeros_like(param) if grad is None else grad.detach().clone()
        self.last_gradient = gradient
        super()._optimizer_step(metrics, prefix)


def objective(kl_loss_coef: float = 0.1) -> ActorObjective:
    """The loss both sides of the check use (clipping and a KL term, so every metric moves)."""
    return ActorObjective(
        policy_loss=ppo_clip_loss, kl_estimator="k3", kl_loss_coef=kl_loss_coef, entropy_coef=0.01
    )


def plan_for(batch: Batch, world: int) -> Any:
    """The training dispatch of ``batch`` over ``world`` ranks (padding rows marked)."""
    ctx = DispatchContext(role="actor", method="update_actor", protocol="train", world_size=world)
    return dispatch_dp_compute_train(ctx, (batch,), {})


def main() -> None:
    """Run one rank."""
    args = join_group()
    inputs = torch.load(args.inputs, weights_only=False)
    config = FSDPRoleConfig(**inputs["config"], optim=OptimConfig(lr=1e-3))
    actor = GradientRecorder(config, role="actor")
    batch = Batch.from_dict(tensors=inputs["batch"], meta={"temperature": 0.7})
    out: dict[str, Any] = {}
    dispatches = {"marked": dispatch_dp_compute_train, "unmarked": dispatch_dp_compute_proto}
    for name, dispatch in dispatches.items():
        ctx = DispatchContext(
            role="actor", method="update_actor", protocol=name, world_size=args.world
        )
        plan = dispatch(ctx, (batch,), {})
        (piece,), _ = plan.calls[args.rank]
        metrics = actor.update_actor(piece, objective())
        out[name] = {"metrics": metrics, "gradient": actor.last_gradient, "rows": len(piece)}
    # Token-budget passes: a budget that fits the rank with the shortest rows in one pass,
    # so the ranks need different numbers of passes and must agree on the largest.
    pieces = [call[0][0] for call in plan_for(batch, args.world).calls.values()]
    budget = min(2 * int(p["attention_mask"].sum(-1).max()) for p in pieces)
    actor.config = attrs.evolve(actor.config, micro_batch_tokens=budget)
    piece = pieces[args.rank]
    needed = len(token_budget_groups(piece["attention_mask"].sum(-1).tolist(), budget))
    metrics = actor.update_actor(piece, objective())
    out["budget"] = {"metrics": metrics, "gradient": actor.last_gradient, "needed": needed}
    torch.save(out, args.out / f"rank{args.rank}.pt")
    # Every rank done before any tears down: rank 0 hosts the store the others still use.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
