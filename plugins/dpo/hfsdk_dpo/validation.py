"""Cross-section checks of a DPO run's config: the shared RL settings DPO never reads."""

from __future__ import annotations

from typing import Any

from hfsdk_dpo.dpo_config import DPOConfig
from hfsdk_supervised_data.unread_settings import unread_setting_problems

# Settings of hfsdk.AlgorithmConfig that DPO's program never reads, with why: it samples
# nothing (no group of samples, no reward to put a KL in) and its loss takes the mean over
# pairs (no per-token aggregation). Set to anything but their default they were dropped
# silently (a run gave bit-identical losses).
_UNREAD = {
    "kl_in_reward": "it has no reward to put a KL in",
    "kl_coef": "it has no reward to put a KL in",
    "kl_controller": "it has no reward KL to control",
    "target_kl": "it has no reward KL to control",
    "kl_horizon": "it has no reward KL to control",
    "n_samples_per_prompt": "it samples nothing: each row is one given pair",
    "loss_agg_mode": "its loss is the mean over pairs of each pair's loss",
}


def dpo_config_problems(config: Any) -> list[str]:
    """One line per problem; for another algorithm's run, only its use of the dpo loss."""
    algo = config.algorithm
    if not isinstance(algo, DPOConfig):
        if getattr(algo, "policy_loss", None) != "dpo":  # reward_model has none
            return []
        # The dpo loss reads rows as (chosen, rejected) pairs, which only DPO's data builds:
        # another algorithm's samples are no such pairs.
        return [
            f"algorithm.policy_loss='dpo' in a {config.algo} run: the dpo loss trains on "
            "(chosen, rejected) pairs of a preference dataset, which only --algo dpo builds; "
            f"use --algo dpo, or leave algorithm.policy_loss at {config.algo}'s default"
        ]
    problems = []
    if algo.policy_loss != "dpo":
        # Another loss reads other settings (ppo_clip has no beta) and other batch keys:
        # the run died at step 1 with an AttributeError.
        problems.append(
            f"algorithm.policy_loss={algo.policy_loss!r}: DPO trains with the pairwise dpo loss "
            "only (the policy_loss section holds its beta and label_smoothing); set "
            "algorithm.policy_loss: dpo, or pick the algorithm of that loss (--algo ppo, sft)"
        )
    if algo.advantage_estimator is not None:
        problems.append(
            f"algorithm.advantage_estimator={algo.advantage_estimator!r}: DPO estimates no "
            "advantages (the pair's label is the signal), so it would do nothing; remove it"
        )
    return problems + unread_setting_problems(algo, "dpo", _UNREAD)
