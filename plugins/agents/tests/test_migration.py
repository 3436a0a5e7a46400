"""verl's multi-turn tool config and TRL's ``tools=[fn]`` map onto rollout.multi_turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from hfsdk.core.config import resolve_run_config
from hfsdk_agents.config import MultiTurnConfig
from hfsdk_agents.tools import call_tool, load_tools
from hfsdk_migration.importing import import_config

from .verl_style_tools import CalcTool

SCHEMA = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


def test_verl_multi_turn_and_its_tool_yaml_map_and_run(tmp_path: Path) -> None:
    tool_file = tmp_path / "tool_config.yaml"
    tool_file.write_text(
        yaml.safe_dump(
            {
                "tools": [
                    {
                        "class_name": "plugins.agents.tests.verl_style_tools.CalcTool",
                        "config": {"type": "native", "offset": 100},
                        "tool_schema": SCHEMA,
                    }
                ]
            }
        )
    )
    source = {
        "algorithm": {"adv_estimator": "grpo"},
        "data": {"max_response_length": 512},
        "actor_rollout_ref": {
            "rollout": {
                "n": 4,
                "multi_turn": {
                    "enable": True,
                    "max_assistant_turns": 3,
                    "format": "hermes",
                    "max_tool_response_length": 300,
                    "tool_config_path": str(tool_file),
                },
            }
        },
    }
    result = import_config("verl", source)
    cfg = resolve_run_config(None, result.config)
    multi_turn = cfg.rollout.section(MultiTurnConfig)
    assert multi_turn.active and multi_turn.max_turns == 3 and multi_turn.parser == "hermes"
    assert multi_turn.max_tool_output_chars == 300 and multi_turn.max_response_tokens == 512
    assert not any("multi_turn" in line for line in result.unmapped)
    tools = load_tools(multi_turn.tools)
    assert list(tools) == ["calc"] and tools["calc"].schema == SCHEMA
    out = asyncio.run(call_tool(tools, "calc", {"a": 2, "b": 3}, timeout_s=5, max_output_chars=100))
    assert (out.ok, out.content) == (True, "105")  # the class ran, with its config
    # call_tool runs it in a worker process; called here, its lifecycle is visible.
    CalcTool.events.clear()
    assert asyncio.run(tools["calc"].fn(a=2, b=3)) == "105"
    assert CalcTool.events == ["create", "execute", "release"]


def test_trl_tools_list_maps_with_schemas_from_the_functions() -> None:
    source = {
        "num_generations": 4,
        "max_completion_length": 200,
        "tools": ["plugins.agents.tests.test_tools:search"],
        "max_tool_calling_iterations": 2,
    }
    result = import_config("trl", source)
    cfg = resolve_run_config(None, result.config)
    multi_turn = cfg.rollout.section(MultiTurnConfig)
    assert multi_turn.max_turns == 3 and multi_turn.max_response_tokens == 200
    (tool,) = load_tools(multi_turn.tools).values()
    assert tool.name == "search"
    assert tool.schema["function"]["parameters"]["required"] == ["query"]
