"""The ``safe_rlhf`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_ppo.spec import ONE_SAMPLE_PRESET
from hfsdk_safe_rlhf.safe_rlhf_algorithm import SafeRLHFAlgorithm
from hfsdk_safe_rlhf.safe_rlhf_config import SafeRLHFConfig

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
    # PPO's one-sample default-task settings (same roles, same model) with the cost critic
    # trained like the reward critic. λ's step grows with λ, so it is capped: uncapped, one of the
    # seeds measured (docs/default_task.md) ran λ to 4e8 by step 8 and overflowed.
    preset={
        **ONE_SAMPLE_PRESET,
        "cost_critic": ONE_SAMPLE_PRESET["critic"],
        "algorithm": {"cost_threshold": 0.1, "lambda_lr": 0.5, "lambda_max": 10.0},
    },
)
