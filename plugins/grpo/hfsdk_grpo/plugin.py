"""Hook implementations of the GRPO plugin."""

from __future__ import annotations

import hfsdk
from hfsdk.hookspecs import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``grpo``."""
    from hfsdk_grpo.grpo_algorithm import GRPOAlgorithm
    from hfsdk_grpo.grpo_config import GRPOConfig

    register("grpo", GRPOAlgorithm, config_cls=GRPOConfig, roles=GRPOAlgorithm.roles)
