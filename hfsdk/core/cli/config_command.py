"""``hfsdk config show``: the resolved run config as YAML."""

from __future__ import annotations

import click

from hfsdk.core.cli.options import run_config_options


@click.group()
def config() -> None:
    """Inspect run configs."""


@config.command()
@run_config_options
def show(algo: str | None, config_file: str | None, overrides: tuple[str, ...]) -> None:
    """Print the resolved config (defaults + file + overrides) as YAML."""
    from hfsdk.core.config import load_run_config

    click.echo(load_run_config(algo, config_file, overrides).to_yaml(), nl=False)
