"""Hook implementations of hfsdk-plugin-agents (the logic sits in the modules beside it)."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_addhooks(pluginmanager: Any) -> None:
    """Add ``hfsdk_register_agents`` (gateway agents other plugins register)."""
    from hfsdk_agents import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hfsdk.hookimpl
def hfsdk_register_agents(register: Register) -> None:
    """Register ``tool_use``: the tool_use task's agent, written only against ``openai``."""
    from hfsdk_agents.gateway.examples.tool_use_agent import tool_use_agent

    register("tool_use", tool_use_agent)


@hfsdk.hookimpl
def hfsdk_register_rollout_sections(register: Register) -> None:
    """Contribute ``rollout.multi_turn``: tools, the agent loop and its limits."""
    from hfsdk_agents.config import MultiTurnConfig

    register("multi_turn", MultiTurnConfig)


@hfsdk.hookimpl
def hfsdk_wrap_generation(rollout: Any) -> Any | None:
    """Run the agent loop in place of ``generate_sequences`` when ``rollout.multi_turn`` is on."""
    from hfsdk_agents.generate import wrap_generation

    return wrap_generation(rollout)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """Refuse what multi-turn rollouts cannot run with (partial rollouts, sliced replicas)."""
    from hfsdk_agents.checks import multi_turn_problems

    return multi_turn_problems(config)


@hfsdk.hookimpl
def hfsdk_prompt_tool_schemas(config: Any) -> list[dict[str, Any]] | None:
    """The schemas of ``rollout.multi_turn.tools``, for the prompts' chat template."""
    from hfsdk_agents.checks import prompt_tool_schemas

    return prompt_tool_schemas(config)


@hfsdk.hookimpl
def hfsdk_register_tools(register: Register) -> None:
    """Register ``python`` (a sandboxed snippet runner) and ``add`` (the tool_use task's)."""
    from hfsdk_agents.code_tool import python_tool
    from hfsdk_agents.tool_use.task import add

    register("python", python_tool)
    register("add", add)


@hfsdk.hookimpl
def hfsdk_register_agent_loops(register: Register) -> None:
    """Register ``tool_loop`` (generate → tool calls → tools → generate, until done) and
    ``gateway`` (an agent program behind an OpenAI-compatible endpoint)."""
    from hfsdk_agents.gateway.loop import GatewayLoop
    from hfsdk_agents.loops import ToolLoop

    register("tool_loop", ToolLoop)
    register("gateway", GatewayLoop)


@hfsdk.hookimpl
def hfsdk_register_tool_parsers(register: Register) -> None:
    """Register ``hermes`` (``<tool_call>{json}</tool_call>``) and ``llama_function``."""
    from hfsdk_agents.parsers import BUILTIN_PARSERS, CALL_END_MARKERS

    for name, parser in BUILTIN_PARSERS.items():
        register(name, parser, end_marker=CALL_END_MARKERS[name])


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register the ``tool_use`` task's reward (a correct final answer, calls that parse) and
    ``agent_reward`` (the reward a gateway agent returned or posted)."""
    from hfsdk_agents.gateway import reward as gateway_reward
    from hfsdk_agents.tool_use import task as tool_use

    register(tool_use.REWARD_FUNCTION_NAME, tool_use.tool_use_reward)
    register(gateway_reward.REWARD_FUNCTION_NAME, gateway_reward.agent_reward)


@hfsdk.hookimpl
def hfsdk_register_tasks(register: Register) -> None:
    """Register ``tool_use``: two-number addition the model solves by calling ``add``."""
    from hfsdk_agents.tool_use.registration import tool_use_task

    task = tool_use_task()
    register("tool_use", task, doc=task.summary)
