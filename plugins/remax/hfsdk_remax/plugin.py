"""Hook implementations of the ReMax plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``remax``."""
    from hfsdk_remax.spec import REMAX_SPEC

    register(REMAX_SPEC.name, REMAX_SPEC)


@hfsdk.hookimpl
def hfsdk_register_advantage_estimators(register: Register) -> None:
    """Register ``remax`` (greedy-baseline advantages; one per sequence for step-wise segments)."""
    from hfsdk_remax.advantages import ReMaxAdvantageConfig, compute_remax_advantages

    register("remax", compute_remax_advantages, config_cls=ReMaxAdvantageConfig, per_sequence=True)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """``remax`` needs greedy baselines: refuse it for a program that generates none, and
    refuse another estimator under the remax program (its greedy baseline would go unused)."""
    from hfsdk_remax.estimator_checks import baseline_problems

    return baseline_problems(config)
