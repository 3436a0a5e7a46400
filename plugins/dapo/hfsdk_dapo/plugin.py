"""Hook implementations of the DAPO plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``dapo``."""
    from hfsdk_dapo.spec import DAPO_SPEC

    register(DAPO_SPEC.name, DAPO_SPEC)


@hfsdk.hookimpl
def hfsdk_register_policy_losses(register: Register) -> None:
    """Register ``dapo_clip`` (the clipped loss with ε_low 0.2, ε_high 0.28)."""
    from hfsdk_dapo.dapo_config import DAPOClipConfig
    from hfsdk_dapo.losses import dapo_clip_loss

    register("dapo_clip", dapo_clip_loss, config_cls=DAPOClipConfig)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``dapo_dynamic_sampling`` (dynamic sampling is refused for image prompts)."""
    from hfsdk_dapo.preflight import NAME, dynamic_sampling_check

    register(NAME, dynamic_sampling_check)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """Overlong shaping needs a buffer shorter than the responses' budget."""
    from hfsdk_dapo.dapo_config import overlong_problems

    return overlong_problems(config)
