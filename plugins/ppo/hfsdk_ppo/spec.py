"""The ``ppo`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_ppo.ppo_algorithm import PPOAlgorithm
from hfsdk_ppo.ppo_config import PPOConfig

# The default task's settings (tiny model, short responses), written for the
# fsdp training backend and the hf rollout backend.
_ACTOR = {
    "backend": ["fsdp", "megatron"],
    "optim": {"lr": 1e-4},
    "mini_batch_size": 8,
    "micro_batch_size": 16,
}
_CRITIC = {
    "backend": ["fsdp", "megatron"],
    "optim": {"lr": 1e-3},
    "mini_batch_size": 8,
    "micro_batch_size": 16,
}

PPO_SPEC = AlgorithmSpec(
    name="ppo",
    program=PPOAlgorithm,
    config_cls=PPOConfig,
    roles=(
        RoleSpec(name="actor", kind="policy"),
        RoleSpec(name="critic", kind="value"),
        RoleSpec(name="reference", kind="frozen_policy"),
        RoleSpec(name="reward", kind="scorer"),
    ),
    preset={
        "rollout": {"backend": ["hf", "vllm"], "max_response_length": 8},
        "actor": _ACTOR,
        # The frozen reference scores the same batch in passes as large as the actor's.
        "reference": {"backend": ["fsdp", "megatron"], "forward_micro_batch_size": 16},
        "critic": _CRITIC,
    },
)
