"""The examples of the agents plugin's hooks in docs/plugin_hooks.md, run as written."""

from __future__ import annotations

import re
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfsdk import generate_rollout
from hfsdk.core.config import resolve_run_config
from hfsdk.core.generation_strategy import SequencesStrategy, resolve_generation
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager
from hfsdk.core.trainer.preflight import run_tool_schemas

from .fakes import FakeActor, ScriptedRollout, prompt_batch, word_tokenizer

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"
HOOKS = ("hfsdk_register_rollout_sections", "hfsdk_wrap_generation", "hfsdk_prompt_tool_schemas")


def _example(hook: str) -> str:
    """The second python block of the hook's section (the first is its signature)."""
    section = re.search(rf"^## {hook}\n(.*?)(?=^## |\Z)", DOC.read_text(), re.M | re.S)
    assert section is not None, hook
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    return blocks[1]


@pytest.fixture
def doc_plugin() -> Iterator[types.ModuleType]:
    """The three examples as one plugin module, registered beside the installed plugins."""
    module = types.ModuleType("doc_counting_plugin")
    exec(compile("\n".join(_example(h) for h in HOOKS), str(DOC), "exec"), module.__dict__)
    reset_plugin_manager()
    get_plugin_manager().pm.register(module, name="doc_counting")
    yield module
    reset_plugin_manager()


TOK = word_tokenizer(["1", "2", "+", "=", "3"])


def test_the_sub_section_and_strategy_examples_work(doc_plugin: types.ModuleType) -> None:
    cfg = resolve_run_config("grpo", {"rollout": {"counting": {"enabled": True}}})
    assert cfg.rollout.section(doc_plugin.CountingConfig).enabled
    assert cfg.to_dict()["rollout"]["counting"] == {"enabled": True}
    rollout = ScriptedRollout(cfg.rollout, FakeActor(tokenizer=TOK), lambda c: [TOK.eos_token_id])
    assert isinstance(resolve_generation(rollout), doc_plugin.CountingGeneration)
    for _ in range(3):
        out = generate_rollout(rollout, prompt_batch(TOK, ["1 + 2 ="]))
    assert out.meta["rollout_metrics"]["rollout/generate_calls"] == 3.0 and rollout.calls == 3
    off = resolve_run_config("grpo", {})
    plain = ScriptedRollout(off.rollout, FakeActor(tokenizer=TOK), lambda c: [TOK.eos_token_id])
    assert isinstance(resolve_generation(plain), SequencesStrategy)


def test_the_prompt_tools_example_adds_to_the_agents_tools(doc_plugin: types.ModuleType) -> None:
    cfg = resolve_run_config(
        "grpo", {"data": {"prompt_key": "question"}, "rollout": {"multi_turn": {"tools": ["add"]}}}
    )
    names = sorted(schema["function"]["name"] for schema in run_tool_schemas(cfg))
    assert names == ["add", "lookup"]
    assert run_tool_schemas(resolve_run_config("grpo", {})) == []
