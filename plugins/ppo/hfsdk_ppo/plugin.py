"""Hook implementations of the PPO plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``ppo``."""
    from hfsdk_ppo.spec import PPO_SPEC

    register(PPO_SPEC.name, PPO_SPEC)


@hfsdk.hookimpl
def hfsdk_register_advantage_estimators(register: Register) -> None:
    """Register ``gae``."""
    from hfsdk_ppo.advantages import GAEConfig, compute_gae

    register("gae", compute_gae, config_cls=GAEConfig)


@hfsdk.hookimpl
def hfsdk_register_value_losses(register: Register) -> None:
    """Register the ``clipped`` value loss."""
    from hfsdk_ppo.losses import ClippedValueLossConfig, clipped_value_loss

    register("clipped", clipped_value_loss, config_cls=ClippedValueLossConfig)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """``gae`` needs a critic: refuse it for an algorithm without one."""
    from hfsdk_ppo.estimator_checks import critic_problems

    return critic_problems(config)
