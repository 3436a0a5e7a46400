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
