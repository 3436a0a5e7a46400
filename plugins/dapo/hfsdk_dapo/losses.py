"""``dapo_clip``: the registry's ``ppo_clip`` loss with DAPO's decoupled clip bounds."""

from __future__ import annotations

from typing import Any

from hfsdk import get_registry
from hfsdk_dapo.dapo_config import DAPOClipConfig


def dapo_clip_loss(**kwargs: Any) -> Any:
    """``ppo_clip`` with a :class:`~hfsdk_dapo.dapo_config.DAPOClipConfig` (ε_high > ε_low).

    The loss itself is the core's clipped surrogate, looked up when called, so
    DAPO differs from PPO only in its bounds' defaults.
    """
    # Without a config, ppo_clip would fall back to its own (ε_high 0.2, dual clip 3).
    kwargs["config"] = kwargs.get("config") or DAPOClipConfig()
    return get_registry("policy_losses")["ppo_clip"].impl(**kwargs)
