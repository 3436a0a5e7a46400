"""Hook implementations of hfsdk-plugin-agents (the logic sits in the modules beside it)."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_addhooks(pluginmanager: Any) -> None:
    """Add the plugin's own hooks: tools, agent loops, tool-call parsers, gateway agents
    and environments (``hfsdk_register_tools`` ... ``hfsdk_register_environments``)."""
    from hfsdk_agents import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hfsdk.hookimpl
def hfsdk_register_registry_kinds(register: Register) -> None:
    """Add the kinds ``tools``, ``agent_loops``, ``tool_parsers``, ``agents`` and
    ``environments`` (``hfsdk list tools``, ...)."""
    register("tools", "hfsdk_register_tools")
    register("agent_loops", "hfsdk_register_agent_loops")
    register("tool_parsers", "hfsdk_register_tool_parsers")
    register("agents", "hfsdk_register_agents")
    register("environments", "hfsdk_register_environments")


@hfsdk.hookimpl
def hfsdk_register_agents(register: Register) -> None:
    """Register ``tool_use``: the tool_use task's agent, written only against ``openai``."""
    from hfsdk_agents.gateway.examples.tool_use_agent import tool_use_agent

    register("tool_use", tool_use_agent)


@hfsdk.hookimpl
def hfsdk_register_environments(register: Register) -> None:
    """Register ``frozen_lake``: gymnasium's FrozenLake with a ``move`` tool."""
    from hfsdk_agents.environments.frozen_lake import FrozenLake

    register("frozen_lake", FrozenLake)


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
    ``gateway`` (an agent program behind an OpenAI-compatible endpoint) and
    ``environment_loop`` (the tool loop on one environment instance per trajectory)."""
    from hfsdk_agents.environments.loop import EnvironmentLoop
    from hfsdk_agents.gateway.loop import GatewayLoop
    from hfsdk_agents.loops import ToolLoop

    register("tool_loop", ToolLoop)
    register("gateway", GatewayLoop)
    register("environment_loop", EnvironmentLoop)


@hfsdk.hookimpl
def hfsdk_register_tool_parsers(register: Register) -> None:
    """Register ``hermes`` (``<tool_call>{json}</tool_call>``) and ``llama_function``."""
    from hfsdk_agents.parsers import BUILTIN_PARSERS, CALL_END_MARKERS

    for name, parser in BUILTIN_PARSERS.items():
        register(name, parser, end_marker=CALL_END_MARKERS[name])


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register ``tool_use`` (a correct final answer), ``agent_reward`` (the reward a gateway
    agent returned or posted), ``environment`` (the environment's own reward) and
    ``reasoning_gym`` (reasoning-gym's verifier of the row's task)."""
    from hfsdk_agents.environments import reasoning_gym_reward, reward
    from hfsdk_agents.gateway import reward as gateway_reward
    from hfsdk_agents.tool_use import task as tool_use

    register(tool_use.REWARD_FUNCTION_NAME, tool_use.tool_use_reward)
    register(gateway_reward.REWARD_FUNCTION_NAME, gateway_reward.agent_reward)
    register(reward.REWARD_FUNCTION_NAME, reward.environment_reward)
    register(
        reasoning_gym_reward.REWARD_FUNCTION_NAME,
        reasoning_gym_reward.reasoning_gym_reward,
        columns=reasoning_gym_reward.columns_read,
    )


@hfsdk.hookimpl
def hfsdk_register_tasks(register: Register) -> None:
    """Register ``tool_use`` (addition with an ``add`` tool), ``frozen_lake`` (gymnasium's
    FrozenLake with a ``move`` tool) and ``reasoning_gym`` (a reasoning-gym task, offline)."""
    from hfsdk_agents.environments.frozen_lake_registration import frozen_lake_task
    from hfsdk_agents.environments.reasoning_gym_task import reasoning_gym_task
    from hfsdk_agents.tool_use.registration import tool_use_task

    for name, task in (
        ("tool_use", tool_use_task()),
        ("frozen_lake", frozen_lake_task()),
        ("reasoning_gym", reasoning_gym_task()),
    ):
        register(name, task, doc=task.summary)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``environments``: every row names a known environment before the run starts."""
    from hfsdk_agents.environments.checks import environment_rows_check

    register("environments", environment_rows_check)


@hfsdk.hookimpl
def hfsdk_register_step_observers(register: Register) -> None:
    """Register ``unused_agent_rewards``: a warning when gateway agents' rewards go unread."""
    from hfsdk_agents.gateway.reward import unused_agent_rewards_observer

    register("unused_agent_rewards", unused_agent_rewards_observer)


@hfsdk.hookimpl
def hfsdk_register_commands(cli: Any) -> None:
    """Add ``hfsdk reasoning-gym NAME DIR`` (a reasoning-gym task's prompts as a dataset)."""
    from hfsdk_agents.environments.command import reasoning_gym_command

    cli.add_command(reasoning_gym_command)
