"""The ``hfsdk_resolve_placement`` example of docs/plugin_hooks.md works as written."""

from __future__ import annotations

import functools
import re
import types
from pathlib import Path

import pytest

import hfsdk
from hfsdk.core import plugin_manager
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.session import TrainingSession

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"


def _example(hook: str) -> types.ModuleType:
    """The hook's example (its section's second python block), run as a plugin module."""
    section = re.search(rf"^## {hook}\n(.*?)(?=^## |\Z)", DOC.read_text(), re.M | re.S)
    assert section, f"{hook} is not documented"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    module = types.ModuleType("doc_example")
    exec(compile(blocks[1], str(DOC), "exec"), {"hfsdk": hfsdk}, module.__dict__)
    return module


def test_the_resolve_placement_example_places_the_actor_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    example = _example("hfsdk_resolve_placement")
    pm = plugin_manager.build_plugin_manager([("example", example)])  # beside the planner
    monkeypatch.setattr(plugin_manager, "get_plugin_manager", functools.cache(lambda: pm))
    auto = ["placement.mode=auto"]
    config = load_run_config("grpo", None, [*auto, "placement.pools={global: {devices: 3}}"])
    placement = TrainingSession._auto_placement(types.SimpleNamespace(config=config))
    assert {name: p.devices for name, p in placement.pools.items()} == {"rest": 2, "actor_pool": 1}
    assert placement.pool_of("actor") == "actor_pool"
    assert placement.pool_of("reference") == "rest"
    # One device: the example passes, and the planner (asked next) answers.
    one = load_run_config("grpo", None, [*auto, "placement.pools={global: {devices: 1}}"])
    placement = TrainingSession._auto_placement(types.SimpleNamespace(config=one))
    assert sum(p.devices for p in placement.pools.values()) == 1
    assert placement.pool_of("reference") == placement.pool_of("actor")  # never the example's
