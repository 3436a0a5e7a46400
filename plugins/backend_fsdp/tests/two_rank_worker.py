"""One rank of the two-process FSDP2 check in ``test_sharding.py`` (run as a script).

Reads the shared inputs, runs the actor engine over a gloo group of two,
and writes what rank 0 (and each rank's own outputs) saw to ``--out``.
"""

from __future__ import annotations

import shutil

import attrs
import torch
import torch.distributed as dist
from gloo_ranks import join_group  # beside this script, on its sys.path

from hfsdk.core.batch import Batch
from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.sharding import (
    StreamStats,
    gathered,
    is_sharded,
    stream_full_parameters,
    unsharded_units,
)
from hfsdk_policy_losses.losses import reinforce_loss


def main() -> None:
    """Run one rank."""
    args = join_group()
    inputs = torch.load(args.inputs, weights_only=False)
    config = FSDPRoleConfig(**inputs["config"], optim=OptimConfig(**inputs["optim"]))
    actor = ActorEngine(config, role="actor")
    assert is_sharded(actor.module) and actor.dp.size == 2
    local_numel = sum(p.to_local().numel() for p in actor.module.parameters())
    full_numel = sum(p.numel() for p in actor.module.parameters())

    batch = Batch.from_dict(tensors=inputs["batch"], meta={"temperature": 0.7}).chunk(2)[args.rank]
    prompts = Batch.from_dict(tensors=inputs["prompts"]).chunk(2)[args.rank]
    rollout = HFRollout(HFRolloutConfig(max_response_length=5), actor)
    assert rollout.config.weight_sync == "stream"
    streamed = rollout.generate_sequences(prompts, greedy=True)
    greedy = streamed["responses"]
    stream_stats = actor.last_stream
    gathered_greedy = HFRollout(
        HFRolloutConfig(max_response_length=5, weight_sync="gather"), actor
    ).generate_sequences(prompts, greedy=True)["responses"]
    # Count the FSDP units unsharded at each step of a stream (the memory check).
    counted = StreamStats()
    for _ in stream_full_parameters(actor.module, actor.dp, counted, check_one_unit=True):
        pass
    with gathered(actor.module):  # what weight_sync=gather holds: every unit at once
        all_at_once = unsharded_units(actor.module)
    log_probs = actor.compute_log_prob(batch)["old_log_probs"]
    actor.update_actor(batch, ActorObjective(policy_loss=reinforce_loss))
    state = actor.state_dict()
    after = actor.compute_log_prob(batch)["old_log_probs"]
    greedy_after = rollout.generate_sequences(prompts, greedy=True)["responses"]
    actor.save_checkpoint(args.out / "ckpt")
    actor.export_hf(args.out / "hf")
    restored = ActorEngine(config, role="actor")
    restored.load_checkpoint(args.out / "ckpt")
    after_restore = restored.compute_log_prob(batch)["old_log_probs"]
    # A truncated shard of rank 1: the read fails and every rank learns it (none hangs).
    if args.rank == 0:
        shutil.copytree(args.out / "ckpt", args.out / "ckpt_bad")
        shard = args.out / "ckpt_bad" / "actor_dcp" / "__1_0.distcp"
        with shard.open("r+b") as handle:
            handle.truncate(shard.stat().st_size // 2)
    dist.barrier()
    try:
        restored.load_checkpoint(args.out / "ckpt_bad")
        corrupt_error = ""
    except HfsdkError as exc:
        corrupt_error = str(exc)
    torch.save(
        {
            "greedy": greedy,
            "log_probs": log_probs,
            "after": after,
            "greedy_after": greedy_after,
            "gathered_greedy": gathered_greedy,
            "stream_stats": attrs.asdict(stream_stats),
            "counted": attrs.asdict(counted),
            "all_at_once": all_at_once,
            "rollout_metrics": streamed.meta["rollout_metrics"],
            "layer_bytes": max(
                sum(p.numel() * 4 for p in layer.parameters())
                for layer in actor.module.model.layers
            ),
            "after_restore": after_restore,
            "corrupt_error": corrupt_error,
            "model": state["model"],
            "local_numel": local_numel,
            "materialized_before_sharding": actor.materialized_before_sharding,
            "full_numel": full_numel,
        },
        args.out / f"rank{args.rank}.pt",
    )
    # Every rank done before any tears down: rank 0 hosts the store the others still use.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
