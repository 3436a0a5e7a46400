"""The ``ppo`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_ppo.ppo_algorithm import PPOAlgorithm
from hfsdk_ppo.ppo_config import PPOConfig

# The default task's settings (tiny model, short responses). They name no backend:
# each section applies to whichever one is selected, with the keys its config has.
_ACTOR = {
    "optim": {"lr": 1e-4},
    "mini_batch_size": 8,
    "micro_batch_size": 16,
}
_CRITIC = {
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
        "rollout": {"max_response_length": 8},
        "actor": _ACTOR,
        # The frozen reference scores the same batch in passes as large as the actor's.
        "reference": {"forward_micro_batch_size": 16},
        "critic": _CRITIC,
    },
)
