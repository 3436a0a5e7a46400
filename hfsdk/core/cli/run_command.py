"""``hfsdk run``: train with an algorithm."""

from __future__ import annotations

import click

from hfsdk.core.cli.options import run_config_options


@click.command()
@run_config_options
@click.option("--run-dir", default=None, help="Run directory (default runs/<algo>-<timestamp>).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def run(
    algo: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    run_dir: str | None,
    quiet: bool,
) -> None:
    """Train: `hfsdk run --algo grpo` runs the built-in tiny task on CPU."""
    from hfsdk.core.config import load_run_config

    cfg = load_run_config(algo, config_file, overrides)
    click.echo(f"config for {cfg.algo!r} is valid; the trainer is not available yet")
