"""The ``dapo`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_dapo.dapo_algorithm import DAPOAlgorithm
from hfsdk_dapo.dapo_config import DAPOConfig

DAPO_SPEC = AlgorithmSpec(
    name="dapo",
    program=DAPOAlgorithm,
    config_cls=DAPOConfig,
    roles=(
        # No reference model: DAPO trains without a KL term.
        RoleSpec(name="actor", kind="policy"),
        RoleSpec(name="reward", kind="scorer"),
    ),
    extra_stages=("dynamic_sampling",),
    preset={
        "rollout": {"max_response_length": 8},
        # 16 prompts x 4 samples, as GRPO's: two optimizer steps of 32 responses.
        "actor": {"optim": {"lr": 1e-4}, "mini_batch_size": 32, "micro_batch_size": 64},
    },
    summary="DAPO: clip-higher, token-mean loss, overlong shaping, dynamic sampling",
)
