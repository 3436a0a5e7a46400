"""Hook implementations of the Safe-RLHF plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``safe_rlhf``."""
    from hfsdk_safe_rlhf.spec import SAFE_RLHF_SPEC

    register(SAFE_RLHF_SPEC.name, SAFE_RLHF_SPEC)


@hfsdk.hookimpl
def hfsdk_register_advantage_estimators(register: Register) -> None:
    """Register ``safe_rlhf`` ((A_r − λ·A_c)/(1 + λ) from reward and cost GAE)."""
    from hfsdk_safe_rlhf.advantages import SafeRLHFAdvantageConfig, compute_safe_rlhf_advantages

    register("safe_rlhf", compute_safe_rlhf_advantages, config_cls=SafeRLHFAdvantageConfig)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """The ``safe_rlhf`` estimator needs the ``safe_rlhf`` roles, and its program that
    estimator: refuse either mismatch when the config loads."""
    from hfsdk_safe_rlhf.estimator_checks import estimator_problems

    return estimator_problems(config)
