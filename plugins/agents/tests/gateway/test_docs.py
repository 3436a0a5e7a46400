"""The gateway's examples in docs/agents.md and docs/plugin_hooks.md, run as written."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfsdk import generate_rollout
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager
from hfsdk_agents.tool_use.build import ToolUseSpec, train_tokenizer
from hfsdk_agents.tool_use.task import call_text

from ..fakes import prompt_batch, rollout_for
from .helpers import request_rollout

DOCS = Path(__file__).resolve().parents[4] / "docs"
TOKENIZER = train_tokenizer(ToolUseSpec())
EOS = TOKENIZER.eos_token_id


def ids(text: str) -> list[int]:
    return TOKENIZER.encode(text, add_special_tokens=False)


def calculator(context: list[int], seed: int = 0) -> list[int]:
    if ids("</tool_response>")[0] in context:
        answer = context[context.index(ids("<tool_response>")[0]) + 1]
        return [answer, EOS]
    return ids(call_text(12, 30))


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)
    sys.modules[name] = module
    return module


def test_the_agents_md_agent_trains_like_the_tool_loop() -> None:
    text = (DOCS / "agents.md").read_text()
    section = text.split("## The OpenAI-compatible gateway", 1)[1]
    source = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    _module("doc_gateway_agent", source)
    gateway = request_rollout(
        TOKENIZER,
        calculator,
        agent="doc_gateway_agent:calculator_agent",
        renderer="plain",
        max_response_tokens=32,
    )
    out = generate_rollout(gateway, prompt_batch(TOKENIZER, ["12 + 30 ="]))
    loop = rollout_for(
        TOKENIZER, calculator, tools=["add"], renderer="plain", max_response_tokens=32
    )
    want = generate_rollout(loop, prompt_batch(TOKENIZER, ["12 + 30 ="]))
    assert out["responses"].tolist() == want["responses"].tolist()
    assert out["response_mask"].tolist() == want["response_mask"].tolist()
    assert out["response_text"][0].split()[-1] == "42"


@pytest.fixture
def doc_plugin() -> Iterator[types.ModuleType]:
    text = (DOCS / "plugin_hooks.md").read_text()
    section = text.split("### hfsdk_register_agents", 1)[1]
    source = "import hfsdk\n" + re.findall(r"```python\n(.*?)```", section, re.S)[1]
    module = _module("doc_agents_plugin", source)
    reset_plugin_manager()
    get_plugin_manager().pm.register(module, name="doc_agents")
    yield module
    reset_plugin_manager()


def test_the_plugin_hooks_example_registers_an_agent(doc_plugin: types.ModuleType) -> None:
    from hfsdk_agents.gateway.agents import registered_agents

    assert {"echo", "tool_use"} <= set(registered_agents())
    gateway = request_rollout(
        TOKENIZER, lambda c, s: [*ids("5"), EOS], agent="echo", renderer="plain"
    )
    out = generate_rollout(gateway, prompt_batch(TOKENIZER, ["1 + 4 ="]))
    assert out["agent_trajectory"][0]["extra"]["agent_reward"] == 1.0
