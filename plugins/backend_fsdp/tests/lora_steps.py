"""GRPO-style steps of a LoRA actor, shared by the one-process and two-rank LoRA checks.

Each step: reference log-probs from the actor with its adapters disabled,
GRPO group advantages of fixed rewards, one clipped-policy update with a k3
KL loss towards the reference.
"""

from __future__ import annotations

from typing import Any

import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_grpo.advantages import compute_grpo_advantages
from hfsdk_policy_losses.losses import ppo_clip_loss

STEPS = 2
LORA = LoraConfig(rank=4, alpha=8.0)
OBJECTIVE = ActorObjective(policy_loss=ppo_clip_loss, kl_estimator="k3", kl_loss_coef=0.1)


def lora_actor(model_path: str) -> ActorEngine:
    """The LoRA actor both checks train (every linear layer of the blocks adapted)."""
    config = FSDPRoleConfig(
        model_path=model_path,
        mini_batch_size=8,
        micro_batch_size=2,
        optim=OptimConfig(lr=2e-2),
        lora=LORA,
    )
    return ActorEngine(config, role="actor")


def with_advantages(batch: Batch, rewards: torch.Tensor, uids: list[str]) -> Batch:
    """``batch`` with GRPO advantages of sequence ``rewards`` grouped by ``uids``."""
    mask = batch["response_mask"]
    token_rewards = torch.zeros(mask.shape)
    last = (mask.sum(-1).long() - 1).clamp(min=0)
    token_rewards[torch.arange(len(mask)), last] = rewards
    result = compute_grpo_advantages(
        token_level_rewards=token_rewards, response_mask=mask, group_index=uids
    )
    batch["advantages"] = result.advantages
    return batch


def grpo_steps(actor: ActorEngine, batch: Batch) -> list[dict[str, float]]:
    """:data:`STEPS` updates of ``batch`` (this rank's rows), each after fresh ref log-probs."""
    metrics = []
    dropped = ("ref_log_probs", "old_log_probs")
    keys = [k for k in batch.keys() if k not in dropped]  # noqa: SIM118 (a Batch is no dict)
    for _ in range(STEPS):
        step = batch.select(keys)
        step = step.union(actor.compute_ref_log_prob(step))
        step = step.union(actor.compute_log_prob(step).select(["old_log_probs"]))
        metrics.append(actor.update_actor(step, OBJECTIVE))
    return metrics


def adapter_tensors(actor: ActorEngine) -> dict[str, Any]:
    """The full adapter weights (gathered under FSDP; on rank 0 only)."""
    from hfsdk_backend_fsdp.sharding import full_model_state

    return {k: v.clone() for k, v in full_model_state(actor.module).items() if "lora_" in k}
