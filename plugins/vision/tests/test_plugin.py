"""The plugin registers the ``shapes`` reward (and, for now, no task: docs/multimodal.md)."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk_vision.shapes import REWARD_FUNCTION_NAME, shapes_reward


def test_the_plugin_registers_the_shapes_reward() -> None:
    entry = hfsdk.get_registry("reward_functions")[REWARD_FUNCTION_NAME]
    assert entry.plugin == "vision"
    assert entry.impl is shapes_reward


def test_the_plugin_loads_without_the_migration_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    from hfsdk.core.plugin_manager import build_plugin_manager

    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "migration")  # it defines the describers hook
    manager = build_plugin_manager()
    info = manager.plugin_info("vision")
    # Before: failed, "implements unknown hook 'hfsdk_register_prompt_describers'".
    assert info is not None and (info.status, info.error) == ("loaded", None)
    assert "shapes" in manager.registry("tasks")
