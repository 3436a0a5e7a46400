"""How the SDK sees ``reinforce_mean``: roles and kinds, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_algo_example.algorithm import ReinforceMeanAlgorithm, ReinforceMeanConfig

REINFORCE_MEAN_SPEC = AlgorithmSpec(
    name="reinforce_mean",
    program=ReinforceMeanAlgorithm,
    config_cls=ReinforceMeanConfig,
    roles=(
        RoleSpec(name="actor", kind="policy"),
        RoleSpec(name="reference", kind="frozen_policy"),
        RoleSpec(name="reward", kind="scorer"),
    ),
    # The built-in default task's settings for this algorithm (tiny model, short
    # responses); they name no backend and apply to whichever one is selected.
    preset={
        "algorithm": {"n_samples_per_prompt": 4},
        "rollout": {"max_response_length": 8},
        "actor": {
            "optim": {"lr": 1e-4},
            "mini_batch_size": 32,
            "micro_batch_size": 64,
        },
    },
)
