"""Options shared by commands that take a run config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def run_config_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--algo``, ``--config`` and trailing ``key.sub=value`` overrides."""
    func = click.argument("overrides", nargs=-1, metavar="[KEY.SUB=VALUE]...")(func)
    func = click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        default=None,
        help="YAML config file (overrides on the command line win).",
    )(func)
    return click.option("--algo", default=None, help="Algorithm name (hfsdk list algorithms).")(
        func
    )


BUILTIN_TASKS = ("default", "tool_use")
"""``--task`` values: the single-turn default task and the multi-turn ``tool_use`` task."""


def task_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--task``: which built-in task a config without data runs."""
    return click.option(
        "--task",
        type=click.Choice(BUILTIN_TASKS),
        default="default",
        help="Built-in task: default (addition) or tool_use (multi-turn addition with a "
        "calculator tool, docs/agents.md).",
    )(func)


def task_base(task: str) -> dict[str, Any] | None:
    """The settings ``task`` puts under the user's config (``None``: the default task)."""
    if task != "tool_use":
        return None
    from hfsdk.core.agents.tool_use.build import ensure_tool_use_assets, tool_use_preset

    return tool_use_preset(ensure_tool_use_assets())
