"""Refusals before a run starts: the environment settings and every row's environment."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hfsdk import HfsdkError
from hfsdk_agents.config import MultiTurnConfig, multi_turn_config


def environment_problems(config: MultiTurnConfig) -> list[str]:
    """One line per environment setting that cannot run (checked when the config resolves)."""
    from hfsdk_agents.environments.registry import load_environment

    problems = []
    if config.environment is not None and config.environment_column is not None:
        problems.append(
            "rollout.multi_turn.environment and environment_column are both set; give one "
            "environment for all rows or a column naming each row's"
        )
    if config.uses_environments and config.agent is not None:
        problems.append(
            f"rollout.multi_turn.agent={config.agent!r} with an environment: a gateway agent "
            "brings its own tools and reward; drop one of them"
        )
    if config.uses_environments and config.agent is None and not _runs_environments(config):
        problems.append(
            f"rollout.multi_turn.agent_loop={config.agent_loop!r} with an environment: that "
            "loop never runs the environment (only environment_loop does); drop "
            "rollout.multi_turn.agent_loop or set it to environment_loop"
        )
    if config.uses_environments and config.tools:
        problems.append(
            f"rollout.multi_turn.tools={list(config.tools)} with an environment: the model calls "
            "the environment's own tools; drop rollout.multi_turn.tools"
        )
    if config.environment is not None:
        try:
            load_environment(config.environment)
        except HfsdkError as err:
            problems.append(f"rollout.multi_turn.environment: {err}")
    return problems


def environment_reward_problems(config: Any) -> list[str]:
    """The ``environment`` reward in ``reward.functions`` of a run where no environment runs
    (it would fail at the first scoring, after the models loaded and a rollout ran).

    Needs the whole run config (the reward section), so it is not part of
    :func:`environment_problems`; the preflight check :func:`environment_rows_check` runs it
    on the run's scorer signals before the run starts.
    """
    reward = getattr(config, "reward", None)
    functions = getattr(reward, "functions", None) or ()
    return _reward_problems({"reward": functions}, multi_turn_config(config.rollout))


def _reward_problems(
    functions: Mapping[str, Sequence[Any]], multi_turn: MultiTurnConfig
) -> list[str]:
    from hfsdk_agents.environments.reward import REWARD_FUNCTION_NAME

    if multi_turn.uses_environments:
        return []
    return [
        f"{role}.functions lists {REWARD_FUNCTION_NAME!r}, which reads each trajectory's "
        "environment reward, but no environment runs (rollout.multi_turn.environment and "
        f"environment_column are unset); set one of them or drop the {REWARD_FUNCTION_NAME!r} "
        "reward"
        for role, entries in functions.items()
        if any(_function_name(f) == REWARD_FUNCTION_NAME for f in entries)
    ]


def _function_name(entry: Any) -> Any:
    """The name a ``reward.functions`` entry gives (an object or, unresolved, a dict)."""
    return entry.get("name") if isinstance(entry, Mapping) else getattr(entry, "name", None)


def _runs_environments(config: MultiTurnConfig) -> bool:
    """Whether the configured loop runs the rows' environments: ``environment_loop`` (the
    default with an environment) or a subclass of it."""
    if config.agent_loop in (None, "environment_loop"):
        return True
    from hfsdk_agents.environments.loop import EnvironmentLoop
    from hfsdk_agents.loops import load_agent_loop

    try:
        return issubclass(load_agent_loop(config.agent_loop), EnvironmentLoop)
    except HfsdkError:  # a loop that does not load is refused on its own (multi_turn_problems)
        return True


def environment_schemas(config: MultiTurnConfig) -> list[dict[str, Any]]:
    """The tool schemas of the one environment every row runs in (none for a column: each
    row offers only its own environment's tools, which one prompt rendering cannot show)."""
    from hfsdk_agents.environments.registry import load_environment

    if config.environment is None:
        return []
    return [dict(s) for s in load_environment(config.environment).schemas.values()]


def _rows(prepared: Any) -> Iterable[tuple[str, dict[str, Any]]]:
    for label, loader in (("train", prepared.loader), ("validation", prepared.val_loader)):
        for row in getattr(loader, "rows", None) or []:
            yield label, row


def environment_rows_check(config: Any, spec: Any, prepared: Any) -> str | None:
    """Every row names an environment that loads (``environment_column``), and the
    ``environment`` reward is scored only where an environment runs; else one line."""
    from hfsdk_agents.environments.loop import environment_name
    from hfsdk_agents.environments.registry import load_environment

    multi_turn = multi_turn_config(config.rollout)
    signals = getattr(prepared, "signal_configs", None) or {}
    problems = _reward_problems(
        {role: getattr(s, "functions", None) or () for role, s in signals.items()}, multi_turn
    )
    if problems:
        raise HfsdkError("; ".join(problems))
    if multi_turn.environment_column is None:
        return None
    seen: set[str] = set()
    for label, row in _rows(prepared):
        try:
            name = environment_name(row, multi_turn)
        except HfsdkError as err:
            raise HfsdkError(f"{label} data: {err}") from None
        if name not in seen:
            seen.add(name)
            try:
                load_environment(name)
            except HfsdkError as err:
                raise HfsdkError(
                    f"{label} data, row {row.get('uid', '?')}, column "
                    f"{multi_turn.environment_column!r}: {err}"
                ) from None
    return None
