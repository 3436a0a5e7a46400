"""Settings multi-turn rollouts cannot run with, refused when the config is resolved."""

from __future__ import annotations

from typing import Any

from hfsdk_agents.config import multi_turn_config


def multi_turn_problems(config: Any) -> list[str]:
    """One line per setting that clashes with an active ``rollout.multi_turn``."""
    from hfsdk_agents.environments.checks import environment_problems, environment_reward_problems

    multi_turn = multi_turn_config(config.rollout)
    problems = environment_reward_problems(config)  # an environment reward needs a loop
    if not multi_turn.active:
        if multi_turn.loop_args:  # no loop runs: they would be ignored without a word
            problems.append(
                f"rollout.multi_turn.loop_args {sorted(multi_turn.loop_args)} are set but "
                "rollouts are not multi-turn (no tools, agent_loop, agent or environment); "
                "set rollout.multi_turn.agent_loop (or tools) or drop loop_args"
            )
        return problems
    problems += environment_problems(multi_turn)
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
    problems.extend(loop_problems(multi_turn))
    return problems


def loop_problems(multi_turn: Any) -> list[str]:
    """A parser or agent loop no registry knows, or ``loop_args`` its loop does not take.

    Looked up here, when the config is resolved: otherwise they fail at the first
    generation, after the models have loaded.
    """
    import inspect

    from hfsdk import HfsdkError, get_registry
    from hfsdk_agents.loops import load_agent_loop

    problems = []
    try:
        get_registry("tool_parsers")[multi_turn.parser]
    except HfsdkError as err:
        problems.append(f"rollout.multi_turn.parser: {err}")
    name = multi_turn.loop_name
    try:
        cls = load_agent_loop(name)
    except HfsdkError as err:
        said = str(err)
        key = "rollout.multi_turn.agent_loop"
        problems.append(said if said.startswith(key) else f"{key}: {said}")
        return problems
    if multi_turn.loop_args:
        try:
            inspect.signature(cls).bind(**multi_turn.loop_args)
        except ValueError:  # no signature to read (a builtin): the loop is trusted as it is
            pass
        except TypeError as err:
            problems.append(
                f"rollout.multi_turn.loop_args {sorted(multi_turn.loop_args)}: the agent loop "
                f"{name!r} ({cls.__name__}) does not take them ({err}); drop them, or set "
                "rollout.multi_turn.agent_loop to a loop whose constructor takes them"
            )
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
