"""Hook implementations of the vision plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register ``shapes``: 1.0 where the response names the square's colour."""
    from hfsdk_vision import shapes

    register(shapes.REWARD_FUNCTION_NAME, shapes.shapes_reward)
