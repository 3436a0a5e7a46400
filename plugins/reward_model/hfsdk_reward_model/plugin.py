"""Hook implementations of the reward-model plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``reward_model`` (reward and cost models)."""
    from hfsdk_reward_model.spec import REWARD_MODEL_SPEC

    register(REWARD_MODEL_SPEC.name, REWARD_MODEL_SPEC)
