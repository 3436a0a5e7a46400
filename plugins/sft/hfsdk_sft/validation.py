"""Cross-section checks of an SFT run's config: the shared RL settings SFT never reads."""

from __future__ import annotations

from typing import Any

from hfsdk_sft.sft_config import SFTConfig
from hfsdk_supervised_data.unread_settings import unread_setting_problems

# Settings of hfsdk.AlgorithmConfig that SFT's program never reads, with why: it samples
# nothing (each row is one given response, so no group and no reward to put a KL in) and has
# no reference role (kl_loss_coef is refused, so no KL estimate is ever taken). Set to
# anything but their default they were dropped silently.
_UNREAD = {
    "kl_in_reward": "it has no reward to put a KL in",
    "kl_coef": "it has no reward to put a KL in",
    "kl_controller": "it has no reward KL to control",
    "target_kl": "it has no reward KL to control",
    "kl_horizon": "it has no reward KL to control",
    "kl_estimator": "it has no reference role to estimate a KL against",
    "n_samples_per_prompt": "it samples nothing: each row is one given response",
}


def sft_config_problems(config: Any) -> list[str]:
    """One line per problem; none for runs of other algorithms."""
    algo = config.algorithm
    if not isinstance(algo, SFTConfig):
        return []
    problems = []
    if algo.kl_loss_coef > 0:
        # The KL loss reads ref_log_probs; the update failed at step 1 for want of them.
        problems.append(
            f"algorithm.kl_loss_coef={algo.kl_loss_coef}: SFT has no reference role to take a "
            "KL loss against; set algorithm.kl_loss_coef: 0"
        )
    if algo.policy_loss != "nll":
        # Another loss reads keys SFT's batch only fills with placeholders: ppo_clip trained
        # a clipped objective on them and sft/loss (actor/nll) was null.
        problems.append(
            f"algorithm.policy_loss={algo.policy_loss!r}: SFT trains with the nll loss of the "
            "given responses only; set algorithm.policy_loss: nll, or pick the algorithm of "
            "that loss (--algo ppo, dpo)"
        )
    return problems + unread_setting_problems(algo, "sft", _UNREAD)
