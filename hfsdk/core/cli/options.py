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


def task_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--task``: which registered task a config without data runs (``hfsdk list tasks``)."""
    from hfsdk.core.tasks import DEFAULT_TASK

    return click.option(
        "--task",
        default=DEFAULT_TASK,
        metavar="NAME",
        help="Built-in task a config without data runs, as plugins register them "
        "(hfsdk list tasks: the addition task 'default', a multi-turn tool task, ...).",
    )(func)


def task_base(task: str) -> dict[str, Any] | None:
    """The settings ``task`` puts under the user's config (``None``: the default task, which
    runs as the fallback of a config without data)."""
    from hfsdk.core.tasks import DEFAULT_TASK, get_task

    if task == DEFAULT_TASK:
        return None  # looked up only when the run needs its assets (it may name its own)
    settings = get_task(task).settings
    return dict(settings()) if settings is not None else None
