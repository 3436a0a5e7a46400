"""The ``hfsdk`` command group; each subcommand lives in its own module.

Plugins add subcommands through ``hfsdk_register_commands(cli)``. Nothing here
imports torch or ray: ``hfsdk --help`` and ``hfsdk plugins`` stay fast.
"""

from __future__ import annotations

import sys

import click

import hfsdk
from hfsdk.core.cli.config_command import config
from hfsdk.core.cli.errors import exit_with, run_reporting_errors
from hfsdk.core.cli.known_commands import KNOWN_COMMANDS, PluginCommandGroup
from hfsdk.core.cli.list_command import list_entries
from hfsdk.core.cli.plugins_command import plugins
from hfsdk.core.cli.run_command import run
from hfsdk.core.logs import configure_logging


@click.group(cls=PluginCommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(hfsdk.__version__, "--version", prog_name="hfsdk")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default=None,
    help="hfsdk's log lines from this level (default info, or HFSDK_LOG_LEVEL); other "
    "libraries' from warning. A run also logs to <run_dir>/hfsdk.log.",
)
def cli(debug: bool, log_level: str | None) -> None:
    """hfsdk: plugin-based RL post-training of language models (HybridFlow design)."""
    if log_level:
        configure_logging(log_level)


cli.add_command(plugins)
cli.add_command(list_entries)
cli.add_command(config)
cli.add_command(run)


def _groups(group: click.Group, path: str = "hfsdk") -> list[tuple[str, click.Group]]:
    nested = [(f"{path} {n}", c) for n, c in group.commands.items() if isinstance(c, click.Group)]
    return [(path, group), *(g for name, child in nested for g in _groups(child, name))]


_CORE_COMMANDS = {group: dict(group.commands) for _, group in _groups(cli)}
"""The core's own commands of each group, before any plugin adds to them."""


def build_cli() -> click.Group:
    """The command group with the subcommands the loaded plugins add to the core's groups;
    what an earlier build in this process added is taken away first (a disabled plugin's)."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    manager = get_plugin_manager()
    for group, commands in _CORE_COMMANDS.items():
        group.commands = dict(commands)
    owners = {c: "the core" for _, group in _groups(cli) for c in group.commands.values()}
    # The first registered first (a plugin KNOWN_COMMANDS names before all): one that raises is
    # dropped alone; a name already taken leaves out only that command.
    known, dists = set(KNOWN_COMMANDS.values()), {p.name: p.distribution for p in manager.plugins}
    impls = manager.hook.hfsdk_register_commands.get_hookimpls()
    for impl in sorted(impls, key=lambda i: dists.get(i.plugin_name) not in known):
        before = {(path, group): dict(group.commands) for path, group in _groups(cli)}
        try:
            impl.function(**{name: cli for name in impl.argnames})
        except Exception as exc:
            for (_, group), commands in before.items():
                group.commands = commands
            manager.mark_failed(impl.plugin_name, "hfsdk_register_commands", exc)
            continue
        mine = f"plugin {impl.plugin_name!r}"
        for (path, group), old in before.items():
            for name in [n for n in old if group.commands.get(n) is not old[n]]:
                group.commands[name] = old[name]
                print(f"hfsdk: {mine}'s command '{path} {name}' is left out: {owners[old[name]]} "
                      "has that name; rename one of them", file=sys.stderr)  # fmt: skip
        owners = {c: mine for _, group in _groups(cli) for c in group.commands.values()} | owners
    # --debug anywhere (debug_requested reads argv): click's parser still knows an option's value
    debug = click.Option(["--debug"], is_flag=True, hidden=True, expose_value=False)
    for command in {c for _, group in _groups(cli) for c in (group, *group.commands.values())}:
        if not any("--debug" in param.opts for param in command.params):
            command.params.append(debug)
    return cli


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    argv = list(sys.argv[1:] if argv is None else argv)
    explicit = any(a == "--log-level" or a.startswith("--log-level=") for a in argv)
    code = 0 if explicit else run_reporting_errors(configure_logging, argv)  # HFSDK_LOG_LEVEL
    if code:
        exit_with(code)
    exit_with(run_reporting_errors(lambda: _run_cli(argv), argv))


def _run_cli(argv: list[str]) -> None:
    status = build_cli().main(args=argv, prog_name="hfsdk", standalone_mode=False)
    if type(status) is int and status:  # click returns an Exit's status here, not raises it
        raise click.exceptions.Exit(status)
