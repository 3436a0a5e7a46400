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


@config.command(name="import")
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Choice(["verl", "trl"]),
    help="The project the config comes from: verl (ppo_trainer keys) or trl "
    "(GRPOConfig/PPOConfig).",
)
@click.argument("args", nargs=-1, metavar="FILE [KEY.SUB=VALUE]...")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the hfsdk config here (atomically) instead of printing it.",
)
@click.option("--algo", default=None, help="Algorithm to use instead of the one inferred.")
def import_command(source: str, args: tuple[str, ...], out: str | None, algo: str | None) -> None:
    """Turn a verl or TRL config into an hfsdk run config.

    FILE is YAML or JSON; KEY.SUB=VALUE overrides in the source's own key names
    (as in verl's command lines) apply on top of it, and may replace the file.
    Every key without an hfsdk counterpart is listed, one per line.

    \b
        hfsdk config import --from verl ppo_trainer.yaml --out run.yaml
        hfsdk config import --from trl grpo_config.json --out run.yaml
    """
    from hfsdk.core.config.importing import import_config, load_source, write_atomic
    from hfsdk.core.config.loader import apply_overrides
    from hfsdk.core.errors import ConfigError

    files = [a for a in args if "=" not in a]
    overrides = [a for a in args if "=" in a]
    if len(files) > 1:
        raise ConfigError(f"give one config FILE, got {files}; the rest must be KEY=VALUE")
    if not files and not overrides:
        raise ConfigError("give a config FILE and/or KEY=VALUE overrides to import")
    data = apply_overrides(load_source(files[0]) if files else {}, overrides)
    result = import_config(source, data, algo=algo)
    if out:
        write_atomic(out, result.to_yaml())
        click.echo(f"wrote {out} (algo {result.config['algo']})")
    else:
        click.echo(result.to_yaml(), nl=False)
    if result.unmapped:
        click.echo(f"{len(result.unmapped)} {source} key(s) not mapped:", err=not out)
        for line in result.unmapped:
            click.echo(f"  {line}", err=not out)
