"""Rank side of ``test_megatron_vllm.py``: a megatron actor feeding vLLM through the hybrid engine.

For each generation tp: build the actor at training tp=2 on two gloo ranks,
greedy-decode with :class:`HybridVLLMRollout` (built through the contract), sample once (log-probs against
the actor's), take one ``update_actor`` step, decode again, and return what
the test compares with HF ``generate``.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import torch

from hfsdk.core.batch import Batch
from hfsdk.core.plugin_manager import get_registry
from hfsdk_backend_common import WeightSyncMismatch
from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_megatron.engine import MegatronEngine
from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig
from hfsdk_faults.faults import FAULT_ENV
from hfsdk_rollout_vllm.hybrid_vllm import HybridVLLMRollout
from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout


def scenario(
    path: str, prompts: dict, tg: int, width: int, fault: str | None = None
) -> dict[str, Any]:
    """One generation layout on this rank (``fault``: ``HFSDK_FAULT_INJECT`` for the reload
    after the update; the result then holds what the reload raised, as ``"raised"``)."""
    from megatron.core import parallel_state as mpu

    mpu.destroy_model_parallel()
    config = MegatronRoleConfig(
        model_path=path,
        device="cpu",
        parallel=ParallelConfig(tp=2),
        rollout_layout=RolloutLayoutConfig(tp=tg),
        mini_batch_size=4 * len(prompts["input_ids"]),
        micro_batch_size=4 * len(prompts["input_ids"]),
        optim=OptimConfig(lr=0.01),
    )
    eng = MegatronEngine(config, role="actor", kind="actor")
    rollout = VLLMRollout.build(
        VLLMRolloutConfig(max_prompt_length=16, max_response_length=width, temperature=1.0), eng
    )
    assert isinstance(rollout, HybridVLLMRollout)
    batch = Batch.from_dict(tensors=prompts)
    first = rollout.generate_sequences(batch, greedy=True)
    fresh_metrics = first.meta["rollout_metrics"]
    torch.manual_seed(1)
    sampled = rollout.generate_sequences(batch, n=4)
    old = eng.compute_log_prob(sampled)["old_log_probs"]
    mask = sampled["response_mask"].bool()
    gap = float((sampled["rollout_log_probs"] - old).abs()[mask].max())
    # One policy-gradient step on the samples with random advantages (the same on both
    # ranks): it moves the greedy outputs without collapsing them.
    train = sampled.select(
        tensor_keys=["input_ids", "attention_mask", "position_ids", "responses", "response_mask"]
    )
    train["old_log_probs"] = old
    advantages = torch.randn(len(train), 1, generator=torch.Generator().manual_seed(0))
    train["advantages"] = advantages * train["response_mask"]
    reinforce = get_registry("policy_losses")["reinforce"].impl
    eng.update_actor(train, ActorObjective(policy_loss=reinforce))
    try:  # not told yet: generating from the old weights is refused (a skipped reload)
        rollout.generate_sequences(batch, greedy=True)
        stale = "generated"
    except WeightSyncMismatch as err:
        stale = str(err)
    rollout.update_weights(eng)
    if fault is not None:
        os.environ[FAULT_ENV] = fault
        try:
            rollout.generate_sequences(batch, greedy=True)
            raised = None
        except WeightSyncMismatch as err:
            raised = str(err)
        del rollout, eng
        gc.collect()
        return {"raised": raised}
    second = rollout.generate_sequences(batch, greedy=True)
    state = eng.full_hf_state()
    result = {
        "first": first["responses"].tolist(),
        "stale": stale,
        "second": second["responses"].tolist(),
        "gap": gap,
        "fresh_metrics": fresh_metrics,
        "reload_metrics": second.meta["rollout_metrics"],
        # numpy: pickled by value (torch would share memory with this exiting process)
        "state": {k: v.numpy() for k, v in state.items()} if dist_rank() == 0 else None,
        "weight_updates": rollout.weight_updates,
    }
    del rollout, eng
    gc.collect()
    return result


def dist_rank() -> int:
    """This process's global rank."""
    import torch.distributed as dist

    return dist.get_rank()


def run(
    rank: int,
    world: int,
    path: str,
    prompts: dict,
    tgs: list[int],
    width: int,
    fault: str | None = None,
) -> dict:
    """Every generation tp in the same processes (one engine at a time)."""
    out = {}
    for tg in tgs:
        out[tg] = scenario(path, prompts, tg, width, fault)
    return out
