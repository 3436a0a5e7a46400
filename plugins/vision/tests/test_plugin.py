"""The plugin registers the ``shapes`` reward (and, for now, no task: docs/multimodal.md)."""

from __future__ import annotations

import hfsdk
from hfsdk_vision.shapes import REWARD_FUNCTION_NAME, shapes_reward


def test_the_plugin_registers_the_shapes_reward() -> None:
    entry = hfsdk.get_registry("reward_functions")[REWARD_FUNCTION_NAME]
    assert entry.plugin == "vision"
    assert entry.impl is shapes_reward
