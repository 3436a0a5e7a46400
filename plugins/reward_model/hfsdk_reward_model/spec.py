"""The ``reward_model`` algorithm as the SDK sees it: one trained scorer, its loss, its preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_reward_model import default_pairs
from hfsdk_reward_model.rm_algorithm import RewardModelAlgorithm, objective_from
from hfsdk_reward_model.rm_config import RewardModelConfig

REWARD_MODEL_SPEC = AlgorithmSpec(
    name="reward_model",
    program=RewardModelAlgorithm,
    config_cls=RewardModelConfig,
    # The model being trained: a sequence classifier with a scalar head read at the last
    # token, exactly what a `reward`/`cost` role's model is when it scores.
    roles=(RoleSpec(name="reward_model", kind="score_model"),),
    extra_stages=("pairs",),
    score_objective=objective_from,
    summary=(
        "Reward/cost model: Bradley-Terry on preference pairs; the export is a reward or cost "
        "role's model"
    ),
    preset={
        # Deferred: the pairs are built from the default task (once, cached) when it runs.
        "data": {
            "train_files": default_pairs.train_files,
            "val_files": default_pairs.val_files,
            "batch_size": 32,
        },
        "trainer": {"total_steps": 50, "val_every": 10, "val_before_train": True},
        "reward_model": {
            "optim": {"lr": 3e-4},
            "mini_batch_size": 64,  # 32 pairs: one optimizer step per training step
            "micro_batch_size": 64,
            "forward_micro_batch_size": 64,
        },
    },
)
