"""Hook implementations of the on-policy distillation plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``distill`` and ``distill_multi`` (two teachers, routed or mixed)."""
    from hfsdk_distill.spec import DISTILL_MULTI_SPEC, DISTILL_SPEC

    register(DISTILL_SPEC.name, DISTILL_SPEC)
    register(DISTILL_MULTI_SPEC.name, DISTILL_MULTI_SPEC)


@hfsdk.hookimpl
def hfsdk_register_advantage_estimators(register: Register) -> None:
    """Register ``reverse_kl`` (teacher − student log-prob per token, plus a task reward)."""
    from hfsdk_distill.advantages import ReverseKLAdvantageConfig, compute_reverse_kl_advantages

    register("reverse_kl", compute_reverse_kl_advantages, config_cls=ReverseKLAdvantageConfig)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str]:
    """Teacher routes name teacher roles; no reference KL (a distill spec has no reference)."""
    from hfsdk_distill.validation import distill_config_problems

    return distill_config_problems(config)
