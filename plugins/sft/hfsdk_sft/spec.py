"""The ``sft`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_sft.sft_algorithm import SFTAlgorithm
from hfsdk_sft.sft_config import SFTConfig

SFT_SPEC = AlgorithmSpec(
    name="sft",
    program=SFTAlgorithm,
    config_cls=SFTConfig,
    roles=(
        RoleSpec(name="actor", kind="policy"),
        # Optional, not trained against: reward functions set score greedy validation samples.
        RoleSpec(name="reward", kind="scorer", optional=True),
    ),
    # The default task's freshly initialised model: SFT makes the warm start itself.
    default_model="cold",
    # A generation pipeline would sample batches nothing reads: SFT trains on given responses.
    on_policy_only="it trains on the dataset's responses and samples nothing to generate ahead",
    trains_on_generations=False,
    preset={
        # The task's answers are the responses: "3 + 5 =" -> "8 </s>".
        "algorithm": {"response_key": "answer"},
        "rollout": {"max_response_length": 8},
        "data": {"batch_size": 32},
        "actor": {"optim": {"lr": 1e-3}, "mini_batch_size": 32, "micro_batch_size": 32},
        # Greedy reward and validation loss before training, halfway and at the end.
        "trainer": {"total_steps": 60, "val_before_train": True, "val_every": 30},
    },
)
