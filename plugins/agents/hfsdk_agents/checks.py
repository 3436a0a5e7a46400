"""Settings multi-turn rollouts cannot run with, refused when the config is resolved."""

from __future__ import annotations

from typing import Any

from hfsdk_agents.config import multi_turn_config


def multi_turn_problems(config: Any) -> list[str]:
    """One line per setting that clashes with an active ``rollout.multi_turn``."""
    multi_turn = multi_turn_config(config.rollout)
    if not multi_turn.active:
        return []
    from hfsdk_agents.environments.checks import environment_problems

    problems = environment_problems(multi_turn)
    partial = config.trainer.partial_rollout_tokens
    if partial:
        problems.append(
            f"trainer.partial_rollout_tokens={partial} cuts generations into segments, which "
            "multi-turn rollouts (rollout.multi_turn) do not support; set it to 0"
        )
    pool = config.placement.pools.get("rollout")
    if pool is not None and pool.tp * pool.pp > 1:
        problems.append(
            f"placement.pools.rollout (tp={pool.tp}, pp={pool.pp}): multi-turn rollouts "
            "(rollout.multi_turn) serve requests on full weights, which a tensor-parallel or "
            "pipelined replica does not hold; set placement.pools.rollout.tp: 1 and pp: 1"
        )
    problems.extend(agent_problems(multi_turn_config(config.rollout)))
    if multi_turn.agent_loop is not None and ":" in multi_turn.agent_loop:
        from hfsdk import ConfigError
        from hfsdk_agents.loops import load_agent_loop

        try:
            load_agent_loop(multi_turn.agent_loop)
        except ConfigError as err:
            problems.append(str(err))
    return problems


def agent_problems(multi_turn: Any) -> list[str]:
    """An agent that cannot be loaded, or one given beside another agent loop."""
    if multi_turn.agent is None:
        return []
    if multi_turn.agent_loop not in (None, "gateway"):
        return [
            f"rollout.multi_turn.agent={multi_turn.agent!r} runs through the gateway loop, but "
            f"rollout.multi_turn.agent_loop={multi_turn.agent_loop!r}; drop one of them"
        ]
    from hfsdk import ConfigError
    from hfsdk_agents.gateway.agents import load_agent

    try:
        load_agent(multi_turn.agent)
    except ConfigError as err:
        return [str(err)]
    return []


def prompt_tool_schemas(config: Any) -> list[dict[str, Any]]:
    """The schemas of ``rollout.multi_turn.tools`` (a bad entry fails here, before Ray)."""
    from hfsdk_agents.tools import load_tools

    multi_turn = multi_turn_config(config.rollout)
    if not multi_turn.active:
        return []
    from hfsdk_agents.environments.checks import environment_schemas

    tools = [dict(tool.schema) for tool in load_tools(multi_turn.tools).values()]
    return tools + environment_schemas(multi_turn)
