"""Hook implementations of the planner: cluster presets, commands, ``placement: auto``,
the predicted step time and the memory preflight."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_addhooks(pluginmanager: Any) -> None:
    """Add the planner's own hook ``hfsdk_register_clusters`` (cluster presets)."""
    from hfsdk_planner import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hfsdk.hookimpl
def hfsdk_register_registry_kinds(register: Register) -> None:
    """Add the kind ``clusters`` (``hfsdk list clusters``)."""
    register("clusters", "hfsdk_register_clusters")


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


@hfsdk.hookimpl
def hfsdk_register_step_observers(register: Register) -> None:
    """Register ``predicted_step``: every run logs ``perf/predicted_step_s``."""
    from hfsdk_planner.prediction import prediction_observer

    register("predicted_step", prediction_observer)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``run_memory``: a warning when the memory model says the run will not fit."""
    from hfsdk_planner.memory_check import memory_preflight

    register("run_memory", memory_preflight)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str]:
    """``placement.cluster`` names a preset, a profile file or ``auto``."""
    from hfsdk_planner.cluster_lookup import cluster_config_problems

    return cluster_config_problems(config)
