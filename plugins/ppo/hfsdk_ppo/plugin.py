"""Hook implementations of the PPO plugin."""

from __future__ import annotations

import hfsdk
from hfsdk.hookspecs import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``ppo``."""
    from hfsdk_ppo.ppo_algorithm import PPOAlgorithm
    from hfsdk_ppo.ppo_config import PPOConfig

    register("ppo", PPOAlgorithm, config_cls=PPOConfig, roles=PPOAlgorithm.roles)
