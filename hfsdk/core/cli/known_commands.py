"""Commands that plugins contribute, and the distribution each comes with.

The core's command groups are :class:`PluginCommandGroup` s: a subcommand they
do not have, but that a well-known plugin adds, is one line saying which
distribution to install (or that it is installed but disabled or broken),
exit 2, instead of click's "no such command".
"""

from __future__ import annotations

import click

from hfsdk.core.errors import HfsdkError

KNOWN_COMMANDS: dict[tuple[str, ...], str] = {
    # issue 34: commands that moved out of the core
    ("config", "import"): "hfsdk-plugin-migration",
    ("data",): "hfsdk-plugin-migration",
    ("plan",): "hfsdk-plugin-planner",
    ("calibrate",): "hfsdk-plugin-planner",
    ("plot",): "hfsdk-plugin-planner",
    ("reward",): "hfsdk-plugin-rewards",
    ("replay",): "hfsdk-plugin-run-records",
    ("export",): "hfsdk-plugin-run-records",
}
"""``hfsdk`` subcommand words -> the distribution whose plugin adds them."""


class MissingPluginError(HfsdkError):
    """A command (or feature) whose plugin is not installed, disabled or failed to load."""


def missing_plugin_message(what: str, distribution: str) -> str:
    """One line: ``what`` comes with ``distribution``, and what to do about its state."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    found = [p for p in get_plugin_manager().plugins if p.distribution == distribution]
    if any(p.status == "disabled" for p in found):
        names = ", ".join(p.name for p in found)
        return (
            f"{what} comes with {distribution}, whose plugin {names!r} is disabled here; unset it "
            "in HFSDK_DISABLE_PLUGINS (or add it to HFSDK_LOAD_PLUGINS)"
        )
    failed = [p for p in found if p.status == "failed"]
    if failed:
        reason = (failed[0].error or "").strip().splitlines()[:1] or ["no reason given"]
        return (
            f"{what} comes with {distribution}, whose plugin {failed[0].name!r} failed to load "
            f"({reason[0]}); reinstall it (pip install --force-reinstall {distribution})"
        )
    return f"{what} comes with {distribution}, which is not installed; pip install {distribution}"


class PluginCommandGroup(click.Group):
    """A click group whose missing, well-known subcommands name the plugin to install."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand, or a :class:`MissingPluginError` for a known plugin's command."""
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        words = (*ctx.command_path.split()[1:], cmd_name)
        distribution = KNOWN_COMMANDS.get(words)
        if distribution is None:
            return None
        raise MissingPluginError(missing_plugin_message(f"`hfsdk {' '.join(words)}`", distribution))
