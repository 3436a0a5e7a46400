"""Configuration of the GRPO algorithm."""

from __future__ import annotations

from typing import Any

import attrs

from hfsdk import AlgorithmConfig


@attrs.frozen(kw_only=True)
class GRPOConfig(AlgorithmConfig):
    """GRPO: several samples per prompt, group-relative advantages, KL as a loss term.

    Select ``advantage_estimator: rloo`` or ``reinforce_plus_plus_baseline`` for
    those variants. Dr.GRPO is two settings: ``advantage.norm_by_std: false`` (no std in the
    advantage) and ``algorithm.loss_agg_mode: seq-mean-token-sum-norm`` (no per-response
    length normalisation); either alone is only half of it.
    """

    advantage_estimator: str = "grpo"
    policy_loss: str = "ppo_clip"
    kl_estimator: str = "k3"
    kl_in_reward: bool = False
    kl_loss_coef: float = attrs.field(default=0.01, validator=attrs.validators.ge(0.0))
    n_samples_per_prompt: int = attrs.field(default=4, validator=attrs.validators.ge(1))


GROUP_RELATIVE = frozenset({"grpo", "rloo", "reinforce_plus_plus_baseline"})
"""This plugin's estimators whose advantage is a sample's reward against its group's."""


def group_size_problems(config: Any) -> list[str] | None:
    """A group-relative estimator with one sample per prompt: every advantage is 0, so the
    run would train nothing and say nothing (``hfsdk_validate_config`` messages)."""
    algo = config.algorithm
    if not isinstance(algo, AlgorithmConfig):  # (a program without RL settings: SFT, RM)
        return None
    if algo.advantage_estimator not in GROUP_RELATIVE or algo.n_samples_per_prompt > 1:
        return None
    return [
        f"algorithm.n_samples_per_prompt=1 with advantage_estimator "
        f"{algo.advantage_estimator!r}: a group of one sample has advantage 0, so nothing "
        "would train; sample at least 2 per prompt (4 by default), or use a per-sample "
        "estimator (reinforce_plus_plus)"
    ]
