"""Hook implementations of the Safe-RLHF plugin."""

from __future__ import annotations

import hfsdk
from hfsdk.hookspecs import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``safe_rlhf``."""
    from hfsdk_safe_rlhf.safe_rlhf_algorithm import SafeRLHFAlgorithm
    from hfsdk_safe_rlhf.safe_rlhf_config import SafeRLHFConfig

    register(
        "safe_rlhf", SafeRLHFAlgorithm, config_cls=SafeRLHFConfig, roles=SafeRLHFAlgorithm.roles
    )


@hfsdk.hookimpl
def hfsdk_register_advantage_estimators(register: Register) -> None:
    """Register ``safe_rlhf`` ((A_r − λ·A_c)/(1 + λ) from reward and cost GAE)."""
    from hfsdk_safe_rlhf.advantages import SafeRLHFAdvantageConfig, compute_safe_rlhf_advantages

    register("safe_rlhf", compute_safe_rlhf_advantages, config_cls=SafeRLHFAdvantageConfig)
