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
