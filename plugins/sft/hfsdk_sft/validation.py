"""Cross-section checks of an SFT run's config."""

from __future__ import annotations

from typing import Any

from hfsdk_sft.sft_config import SFTConfig


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
    return problems
