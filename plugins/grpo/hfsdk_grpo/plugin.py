"""Hook implementations of the GRPO plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``grpo``."""
    from hfsdk_grpo.spec import GRPO_SPEC

    register(GRPO_SPEC.name, GRPO_SPEC)


@hfsdk.hookimpl
def hfsdk_register_advantage_estimators(register: Register) -> None:
    """Register ``grpo``, ``rloo``, ``reinforce_plus_plus``, ``reinforce_plus_plus_baseline``.

    ``per_sequence=True``: one advantage per sequence, so step-wise trajectories' segments
    can share it (``reinforce_plus_plus`` discounts per token and cannot).
    """
    from hfsdk_grpo import advantages as adv

    register(
        "grpo", adv.compute_grpo_advantages, config_cls=adv.GRPOAdvantageConfig, per_sequence=True
    )
    register("rloo", adv.compute_rloo_advantages, config_cls=adv.RLOOConfig, per_sequence=True)
    register(
        "reinforce_plus_plus",
        adv.compute_reinforce_plus_plus,
        config_cls=adv.ReinforcePlusPlusConfig,
    )
    register(
        "reinforce_plus_plus_baseline",
        adv.compute_reinforce_plus_plus_baseline,
        config_cls=adv.ReinforcePlusPlusBaselineConfig,
        per_sequence=True,
    )


@hfsdk.hookimpl
def hfsdk_register_policy_losses(register: Register) -> None:
    """Register ``gspo`` (sequence-level importance ratio)."""
    from hfsdk_grpo.losses import GSPOConfig, gspo_loss

    register("gspo", gspo_loss, config_cls=GSPOConfig)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``gspo_aggregation`` (a warning: gspo with a mode other than GSPO's own).

    A preflight check, not ``hfsdk_validate_config``: that hook only refuses, and the
    combination is a legitimate variant; preflight warnings are logged once, before the run.
    """
    from hfsdk_grpo.losses import GSPO_WARNING_NAME, gspo_aggregation_warning

    register(GSPO_WARNING_NAME, gspo_aggregation_warning)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """A group-relative estimator needs groups of at least two samples; the ``grpo``
    estimator's ``epsilon`` is refused where ``norm_by_std: false`` leaves it unused."""
    from hfsdk_grpo.advantages import unused_epsilon_problems
    from hfsdk_grpo.grpo_config import group_size_problems

    return [*(group_size_problems(config) or ()), *(unused_epsilon_problems(config) or ())]
