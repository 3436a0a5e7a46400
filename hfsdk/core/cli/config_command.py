"""``hfsdk config show``: the resolved run config as YAML."""

from __future__ import annotations

import click

from hfsdk.core.cli.options import run_config_options


@click.group()
def config() -> None:
    """Inspect run configs."""


@config.command()
@run_config_options
@click.option(
    "--explain",
    is_flag=True,
    help="Print every key with its value and what it means (unit, default, reference).",
)
def show(
    algo: str | None, config_file: str | None, overrides: tuple[str, ...], explain: bool
) -> None:
    """Print the resolved config (defaults + file + overrides) as YAML."""
    from hfsdk.core.config import load_run_config

    config = load_run_config(algo, config_file, overrides)
    if not explain:
        click.echo(config.to_yaml(), nl=False)
        return
    from hfsdk.core.config.help import explain as explain_section

    click.echo(f"algo: {config.algo!r}")
    for name, section in config.sections.items():
        click.echo("")
        click.echo(f"# {name}")
        for line in explain_section(name, section):
            click.echo(line)
