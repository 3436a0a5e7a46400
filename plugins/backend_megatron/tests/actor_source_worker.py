"""Rank side of ``test_actor_source.py``: the megatron actor behind the rollout contract.

Each scenario builds a tp=2 megatron actor on two gloo ranks, builds the ``hf``
rollout for it through ``hfsdk.build_rollout`` and reports what the test checks:
which path the rollout took, whether any object holds a whole-model HF module,
the greedy responses before and after one update, and the weight stream's cost.
"""

from __future__ import annotations

import gc
from typing import Any

import torch

from hfsdk import build_rollout
from hfsdk.core.batch import Batch
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_megatron.engine import MegatronEngine
from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig
from hfsdk_policy_losses.losses import reinforce_loss

TRAIN_KEYS = ["input_ids", "attention_mask", "position_ids", "responses", "response_mask"]


def hf_modules(*objects: Any) -> list[str]:
    """Attributes of ``objects`` (one level deep) that are transformers models with weights.

    (The ``hf`` rollout's weightless generation module, all on the meta device, holds none.)
    """
    from transformers import PreTrainedModel

    found = []
    for obj in objects:
        for name, value in vars(obj).items():
            if isinstance(value, PreTrainedModel) and any(
                p.device.type != "meta" for p in value.parameters()
            ):
                found.append(f"{type(obj).__name__}.{name}")
    return found


def scenario(path: str, prompts: dict, decoder: str, width: int) -> dict[str, Any]:
    """One model and decoder choice on this rank."""
    from megatron.core import parallel_state as mpu

    mpu.destroy_model_parallel()
    config = MegatronRoleConfig(
        model_path=path,
        device="cpu",
        parallel=ParallelConfig(tp=2),
        mini_batch_size=len(prompts["input_ids"]),
        micro_batch_size=len(prompts["input_ids"]),
        optim=OptimConfig(lr=0.05),
    )
    eng = MegatronEngine(config, role="actor", kind="actor")
    rollout = build_rollout(HFRolloutConfig(max_response_length=width, decoder=decoder), eng)
    held_after_build = hf_modules(eng, rollout)
    batch = Batch.from_dict(tensors=prompts)
    first = rollout.generate_sequences(batch, greedy=True)
    held_after_call = hf_modules(eng, rollout)
    # What the controller does: the collector's output is every replica rank's next batch.
    shared = [first if eng.dp.collects else None]
    torch.distributed.broadcast_object_list(shared, src=0)
    train = shared[0].select(tensor_keys=TRAIN_KEYS)
    mask = train["response_mask"]
    train["old_log_probs"] = torch.zeros_like(mask)
    train["advantages"] = mask.clone()
    eng.update_actor(train, ActorObjective(policy_loss=reinforce_loss))
    rollout.update_weights(eng)
    second = rollout.generate_sequences(batch, greedy=True)
    state = eng.full_hf_state()
    result = {
        "collective": rollout.collective,
        "sharded": rollout.shards is not None,
        "held_after_build": held_after_build,
        "held_after_call": held_after_call,
        "collects": eng.dp.collects,
        "first": first["responses"] if eng.dp.collects else None,
        "second": second["responses"] if eng.dp.collects else None,
        "metrics": first.meta.get("rollout_metrics"),
        "stream": dict(eng.last_weights_metrics),
        "shard_bytes": sum(p.numel() * p.element_size() for p in eng.model.parameters()),
        "state": {k: v.numpy() for k, v in state.items()} if eng.dp.collects else None,
    }
    rollout.close()
    del rollout, eng
    gc.collect()
    return result


def run(rank: int, world: int, models: dict, prompts: dict, cases: list, width: int) -> dict:
    """Every (model, decoder) case in the same two processes."""
    return {(m, d): scenario(models[m], prompts, d, width) for m, d in cases}
