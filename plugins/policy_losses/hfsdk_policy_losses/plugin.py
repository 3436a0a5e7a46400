"""Hook implementations of the standard policy losses and KL estimators."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_policy_losses(register: Register) -> None:
    """Register ``ppo_clip`` (asymmetric clip ratios, dual clip) and ``reinforce``."""
    # Here, not at import: the losses import torch, and `hfsdk plugins` stays fast.
    from hfsdk_policy_losses.losses import (
        PPOClipConfig,
        ReinforceConfig,
        ppo_clip_loss,
        reinforce_loss,
    )

    register("ppo_clip", ppo_clip_loss, config_cls=PPOClipConfig)
    register("reinforce", reinforce_loss, config_cls=ReinforceConfig)


@hfsdk.hookimpl
def hfsdk_register_kl_estimators(register: Register) -> None:
    """Register the KL estimators (``k1``, ``abs``, ``k2``, ``k3``, ``k3_clamped``, ...)."""
    from hfsdk_policy_losses.kl_estimators import KL_ESTIMATORS

    for name, fn in KL_ESTIMATORS.items():
        register(name, fn)
