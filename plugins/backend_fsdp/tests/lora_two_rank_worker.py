"""One rank of the two-process LoRA check in ``test_lora_two_ranks.py`` (run as a script)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))

from gloo_ranks import join_group
from lora_steps import adapter_tensors, grpo_steps, lora_actor

from hfsdk.core.batch import Batch
from hfsdk_backend_fsdp.sharding import is_sharded


def main() -> None:
    """Run one rank: the GRPO steps on its half, then merged weights and a checkpoint."""
    args = join_group()
    inputs = torch.load(args.inputs, weights_only=False)
    actor = lora_actor(inputs["model"])
    assert is_sharded(actor.module) and actor.dp.size == 2
    base_before = {
        k: v.full_tensor().clone() for k, v in actor.module.named_parameters() if "lora_" not in k
    }
    batch = Batch.from_dict(tensors=inputs["batch"]).chunk(2)[args.rank]
    metrics = grpo_steps(actor, batch)
    base_after = {
        k: v.full_tensor() for k, v in actor.module.named_parameters() if "lora_" not in k
    }
    base_unchanged = all(torch.equal(base_after[k], v) for k, v in base_before.items())
    log_probs = actor.compute_log_prob(batch)["old_log_probs"]
    ref = actor.compute_ref_log_prob(batch)["ref_log_probs"]
    merged = {k: v.clone() for k, v in actor.hf_weights()}
    adapters = adapter_tensors(actor)
    actor.save_checkpoint(args.out / "ckpt")
    torch.save(
        {
            "metrics": metrics,
            "log_probs": log_probs,
            "ref_log_probs": ref,
            "merged": merged if args.rank == 0 else None,
            "adapters": adapters,
            "base_unchanged": base_unchanged,
        },
        args.out / f"rank{args.rank}.pt",
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
