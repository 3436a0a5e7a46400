"""Hook implementations of the example plugin (entry point ``reward_example``)."""

from __future__ import annotations

from typing import Any

import hfsdk


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Any) -> None:
    """Register ``keyword_bonus``."""
    from hfsdk_reward_example.rewards import keyword_bonus

    register("keyword_bonus", keyword_bonus)
