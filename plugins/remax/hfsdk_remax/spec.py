"""The ``remax`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_remax.estimator_checks import GREEDY
from hfsdk_remax.remax_algorithm import ReMaxAlgorithm
from hfsdk_remax.remax_config import ReMaxConfig

# The default task's settings (tiny model, short responses). They name no backend:
# each section applies to whichever one is selected, with the keys its config has.
_ACTOR = {
    "optim": {"lr": 1e-4},
    "mini_batch_size": 8,
    "micro_batch_size": 16,
}

REMAX_SPEC = AlgorithmSpec(
    name="remax",
    program=ReMaxAlgorithm,
    config_cls=ReMaxConfig,
    roles=(
        RoleSpec(name="actor", kind="policy"),
        RoleSpec(name="reference", kind="frozen_policy"),
        RoleSpec(name="reward", kind="scorer"),
    ),
    extra_generations=(GREEDY,),
    on_policy_only=(
        "its baseline is the greedy response of the weights being trained, generated in the "
        "same step as the sampled ones"
    ),
    preset={
        "rollout": {"max_response_length": 8},
        # One sample per prompt is too noisy against a greedy baseline; four are not.
        "algorithm": {"n_samples_per_prompt": 4},
        "actor": {**_ACTOR, "mini_batch_size": 32, "micro_batch_size": 64},
        # The frozen reference scores the same batch in passes as large as the actor's.
        "reference": {"forward_micro_batch_size": 64},
    },
)
