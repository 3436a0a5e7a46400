"""The ``dpo`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_dpo.dpo_algorithm import DPOAlgorithm
from hfsdk_dpo.dpo_config import DPOConfig

DPO_SPEC = AlgorithmSpec(
    name="dpo",
    program=DPOAlgorithm,
    config_cls=DPOConfig,
    roles=(
        RoleSpec(name="actor", kind="policy"),
        # Frozen: a second copy of the start, or the LoRA actor with its adapters disabled.
        RoleSpec(name="reference", kind="frozen_policy"),
        # Optional, not trained against: reward functions set score greedy validation samples.
        RoleSpec(name="reward", kind="scorer", optional=True),
    ),
    # The default task's pairs: its right answer chosen over a wrong one, from the warm start.
    default_data="preference_pairs",
    # A generation pipeline would sample batches nothing reads: DPO trains on given responses.
    on_policy_only="it trains on the dataset's responses and samples nothing to generate ahead",
    trains_on_generations=False,
    preset={
        "rollout": {"max_response_length": 8},
        "actor": {"optim": {"lr": 1e-4}, "mini_batch_size": 32, "micro_batch_size": 32},
        "reference": {"forward_micro_batch_size": 32},
        # The warm start's greedy answer is already right (via the filler word): validation
        # samples four answers per prompt, whose mean reward shows the right answer gaining.
        "trainer": {"total_steps": 30, "val_before_train": True, "val_every": 15, "val_n": 4},
    },
)
