"""Hook implementations of the planner: cluster presets, commands, ``placement: auto``."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_clusters(register: Register) -> None:
    """Register the cluster presets ``a100-80gb``, ``h100-80gb``, ``h200-141gb`` and ``local``."""
    from hfsdk_planner.cluster import PRESETS

    for name, factory in PRESETS.items():
        register(name, factory)


@hfsdk.hookimpl
def hfsdk_register_commands(cli: Any) -> None:
    """Add ``hfsdk plan``, ``hfsdk calibrate`` and ``hfsdk plot``."""
    from hfsdk_planner.cli.plan_command import calibrate_command, plan
    from hfsdk_planner.cli.plot_command import plot

    for command in (plan, calibrate_command, plot):
        cli.add_command(command)


@hfsdk.hookimpl
def hfsdk_resolve_placement(config: Any) -> dict[str, Any]:
    """``placement.mode: auto``: the placement search splits the configured devices."""
    from hfsdk_planner.resolve import resolve_placement

    return resolve_placement(config)
