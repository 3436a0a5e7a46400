"""The ``safe_rlhf`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_safe_rlhf.safe_rlhf_algorithm import SafeRLHFAlgorithm
from hfsdk_safe_rlhf.safe_rlhf_config import SafeRLHFConfig

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

SAFE_RLHF_SPEC = AlgorithmSpec(
    name="safe_rlhf",
    program=SafeRLHFAlgorithm,
    config_cls=SafeRLHFConfig,
    roles=(
        RoleSpec(name="actor", kind="policy"),
        RoleSpec(name="critic", kind="value"),
        RoleSpec(name="cost_critic", kind="value"),
        RoleSpec(name="reference", kind="frozen_policy"),
        RoleSpec(name="reward", kind="scorer"),
        RoleSpec(name="cost", kind="scorer"),
    ),
    preset={
        "rollout": {"backend": ["hf", "vllm"], "max_response_length": 8},
        "actor": _ACTOR,
        # The frozen reference scores the same batch in passes as large as the actor's.
        "reference": {"backend": ["fsdp", "megatron"], "forward_micro_batch_size": 16},
        "critic": _CRITIC,
        "cost_critic": _CRITIC,
        "algorithm": {"cost_threshold": 0.1, "lambda_lr": 0.5},
    },
)
