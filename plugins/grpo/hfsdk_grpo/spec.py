"""The ``grpo`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_grpo.grpo_algorithm import GRPOAlgorithm
from hfsdk_grpo.grpo_config import GRPOConfig

# The default task's settings (tiny model, short responses). They name no backend:
# each section applies to whichever one is selected, with the keys its config has.
_ACTOR = {
    "optim": {"lr": 1e-4},
    "mini_batch_size": 8,
    "micro_batch_size": 16,
}

GRPO_SPEC = AlgorithmSpec(
    name="grpo",
    program=GRPOAlgorithm,
    config_cls=GRPOConfig,
    roles=(
        RoleSpec(name="actor", kind="policy"),
        RoleSpec(name="reference", kind="frozen_policy"),
        RoleSpec(name="reward", kind="scorer"),
    ),
    preset={
        "rollout": {"max_response_length": 8},
        # 16 prompts x 4 samples: two optimizer steps of 32 responses per iteration.
        "actor": {**_ACTOR, "mini_batch_size": 32, "micro_batch_size": 64},
        # The frozen reference scores the same batch in passes as large as the actor's.
        "reference": {"forward_micro_batch_size": 64},
    },
)
