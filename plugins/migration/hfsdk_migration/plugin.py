"""Hook implementations of the migration plugin (the logic sits in the modules beside it)."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_addhooks(pluginmanager: Any) -> None:
    """Add the hook ``hfsdk_register_prompt_describers`` (lines of ``hfsdk data inspect``)."""
    from hfsdk_migration import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hfsdk.hookimpl
def hfsdk_register_registry_kinds(register: Register) -> None:
    """Add the kind ``prompt_describers`` (``hfsdk list prompt-describers``)."""
    register("prompt_describers", "hfsdk_register_prompt_describers")


# optionalhook: the rewards plugin adds this hook; with it disabled the importers still load.
@hfsdk.hookimpl(optionalhook=True)
def hfsdk_register_reward_styles(register: Register) -> None:
    """Register the ``verl``, ``trl`` and ``openrlhf`` reward call styles."""
    from hfsdk_migration.reward_styles import STYLE_DOCS, STYLES

    for name, style in STYLES.items():
        register(name, style, doc=STYLE_DOCS[name])


@hfsdk.hookimpl
def hfsdk_register_commands(cli: Any) -> None:
    """Add ``hfsdk config import`` (to the core's ``config`` group) and ``hfsdk data``."""
    from hfsdk_migration.config_import_command import import_command
    from hfsdk_migration.data_command import data

    cli.commands["config"].add_command(import_command)
    cli.add_command(data)
