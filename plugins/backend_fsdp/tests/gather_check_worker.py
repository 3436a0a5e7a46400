"""One rank of the two-process gathered-module check in ``test_gather_check.py`` (a script).

Shards a bfloat16 actor (float32 shards, gathered in bfloat16) over a gloo group of two,
generates twice from the gathered live module (``weight_sync: gather``) and writes what
each rank saw to ``--out``: the first gather's metrics, the shards' local sizes, and the
one line the second gather raised (``HFSDK_FAULT_INJECT=gather_drop:2`` set by the test).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from gloo_ranks import join_group  # beside this script, on its sys.path

from hfsdk.core.batch import Batch
from hfsdk_backend_common import WeightSyncMismatch
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.sharding import (
    check_gathered,
    data_parallel,
    gathered,
    is_sharded,
    shard_bit_sums,
)


def _uneven_module_check() -> dict[str, object]:
    """FSDP2 over odd sizes (rank 1 holds fewer rows, one tensor not at all), mixed precision:
    the shards' sums match the bfloat16 gather, and a flipped bit is caught."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Linear(5, 1))
    mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
    fully_shard(module, mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
    dp = data_parallel()
    local_rows = {n: p.to_local().shape[0] for n, p in module.named_parameters()}
    sums = shard_bit_sums(module, torch.bfloat16)
    with gathered(module):
        dtypes = {str(p.dtype) for p in module.parameters()}
        clean = check_gathered(module, sums, dp, torch.device("cpu"))
    with gathered(module):
        faulty = check_gathered(module, sums, dp, torch.device("cpu"), corrupt="0.weight")
    return {"local_rows": local_rows, "dtypes": dtypes, "clean": clean, "faulty": faulty}


def main() -> None:
    """Run one rank."""
    args = join_group()
    inputs = torch.load(args.inputs, weights_only=False)
    actor = ActorEngine(FSDPRoleConfig(**inputs["config"]), role="actor")
    assert is_sharded(actor.module) and actor.param_dtype == torch.bfloat16
    local_shapes = {n: tuple(p.to_local().shape) for n, p in actor.module.named_parameters()}
    full_shapes = {n: tuple(p.shape) for n, p in actor.module.named_parameters()}
    uneven = _uneven_module_check()
    prompts = Batch.from_dict(tensors=inputs["prompts"]).chunk(2)[args.rank]
    rollout = HFRollout(HFRolloutConfig(max_response_length=3, weight_sync="gather"), actor)
    clean = rollout.generate_sequences(prompts, greedy=True).meta["rollout_metrics"]
    try:
        rollout.generate_sequences(prompts, greedy=True)
        error = ""
    except WeightSyncMismatch as exc:
        error = str(exc)
    torch.save(
        {
            "clean": clean,
            "error": error,
            "local_shapes": local_shapes,
            "full_shapes": full_shapes,
            "uneven": uneven,
        },
        args.out / f"gather{args.rank}.pt",
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
