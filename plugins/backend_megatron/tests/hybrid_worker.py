"""Rank side of ``test_hybrid_rollout.py``: megatron actor -> 3D-HybridEngine rollout.

For each (p, t) -> (pg, tg): build the actor at (t, p) on four gloo ranks,
greedy-decode through the ``hf`` rollout's shard path (:class:`HybridShards`), take one ``update_actor`` step,
decode again, and return (from the collecting rank of replica 0) the
responses, the updated weights and the transition's metrics, and from every
rank the bytes the micro-DP formula says it receives.
"""

from __future__ import annotations

from typing import Any

import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common.hybrid.accounting import transition_bytes
from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_megatron.engine import MegatronEngine
from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig
from hfsdk_policy_losses.losses import reinforce_loss

# The last two decode over two generation pipeline stages (rollout pp = 2).
PAIRS = [(1, 2, 1, 1), (2, 2, 1, 2), (1, 4, 1, 2), (2, 1, 1, 1), (2, 1, 2, 1), (2, 2, 2, 1)]


def scenario(path: str, prompts: dict, p: int, t: int, pg: int, tg: int) -> dict[str, Any]:
    """One layout pair on this rank."""
    from megatron.core import parallel_state as mpu

    mpu.destroy_model_parallel()
    config = MegatronRoleConfig(
        model_path=path,
        device="cpu",
        parallel=ParallelConfig(tp=t, pp=p),
        rollout_layout=RolloutLayoutConfig(tp=tg, pp=pg),
        mini_batch_size=4,
        micro_batch_size=2,
        optim=OptimConfig(lr=0.05),
    )
    eng = MegatronEngine(config, role="actor", kind="actor")
    rollout = HFRollout(HFRolloutConfig(max_response_length=6), eng)
    shards = rollout.shards
    assert shards is not None
    batch = Batch.from_dict(tensors=prompts)
    part = batch.chunk(eng.dp_size)[eng.dp_rank]
    first = rollout.generate_sequences(part, greedy=True)
    metrics = first.meta["rollout_metrics"]
    # One policy-gradient step on the greedy responses (advantage +1): the next
    # greedy decoding must come from the new weights.
    train = first.select(
        tensor_keys=["input_ids", "attention_mask", "position_ids", "responses", "response_mask"]
    )
    mask = train["response_mask"]
    train["old_log_probs"] = torch.zeros_like(mask)
    train["advantages"] = mask.clone()
    eng.update_actor(train, ActorObjective(policy_loss=reinforce_loss))
    second = rollout.generate_sequences(part, greedy=True)
    state = eng.full_hf_state()
    element_size = next(iter(shards.training_shard().values())).element_size()
    formula = transition_bytes(
        shards.specs, shards.train, shards.gen, torch.distributed.get_rank(),
        eng.shape.num_layers, element_size=element_size,
    )  # fmt: skip
    collect = eng.last_stage and eng.tp_rank == 0 and eng.dp_rank == 0
    result = {
        "first": first["responses"],
        "second": second["responses"],
        "metrics": metrics,
        "stats": shards.hybrid.stats,
        "formula": formula,
        "state": state if collect else None,
        "collect": collect,
    }
    del eng, rollout
    return result


def run_all(rank: int, world: int, path: str, prompts: dict) -> dict[tuple, Any]:
    """Every pair in the same four processes."""
    return {(p, t, pg, tg): scenario(path, prompts, p, t, pg, tg) for p, t, pg, tg in PAIRS}
