"""``hfsdk config import``: a verl, TRL or OpenRLHF config as an hfsdk run config.

Added to the core's ``hfsdk config`` group by this plugin's ``hfsdk_register_commands``.
"""

from __future__ import annotations

from pathlib import Path

import click

_VALUE_FLAGS = ("--config-name", "-cn", "--config-path", "-cp")
"""verl (Hydra) flags whose value is the next argument."""


def _split_file(source: str, args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The FILE argument(s) and the source's own arguments.

    verl: every word that is not an override (``k=v``, ``+k=v``, ``~k``) or a Hydra
    flag (and its value) is a file; TRL/OpenRLHF: only a first word that is not a flag.
    """

    def is_file(arg: str) -> bool:
        return not arg.startswith(("-", "~", "+")) and "=" not in arg

    if source != "verl":
        if args and is_file(args[0]):
            return [args[0]], list(args[1:])
        return [], list(args)
    files, rest = [], []
    words = iter(args)
    for word in words:
        if word in _VALUE_FLAGS:
            rest.extend([word, next(words, "")])
        elif is_file(word):
            files.append(word)
        else:
            rest.append(word)
    return files, rest


@click.command(
    name="import",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": True},
)
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Choice(["verl", "trl", "openrlhf"]),
    help="The project the config comes from: verl (ppo_trainer keys), trl "
    "(GRPOConfig/PPOConfig) or openrlhf (train_ppo_ray flags).",
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[FILE] [ARG]...")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the hfsdk config here (atomically) instead of printing it.",
)
@click.option("--algo", default=None, help="Algorithm to use instead of the one inferred.")
@click.option(
    "--verl-config-dir",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A directory of verl configs (verl's trainer/config, or the one holding a script's "
    "--config-name), searched in order, then an installed verl's; without any, hfsdk's copy "
    "of verl's defaults for the keys it maps. Repeatable.",
)
def import_command(
    source: str,
    args: tuple[str, ...],
    out: str | None,
    algo: str | None,
    verl_config_dir: tuple[str, ...],
) -> None:
    """Turn a verl, TRL or OpenRLHF config into an hfsdk run config.

    FILE is a YAML/JSON config or a launch script ('python3 -m
    verl.trainer.main_ppo k=v ...', 'trl <trainer> --flag v ...', 'python -m
    openrlhf.cli.train_ppo_ray --flag v ...'). ARGs are arguments in the
    source's own syntax on top of it (verl: KEY.SUB=VALUE; TRL/OpenRLHF:
    --flag VALUE) and may replace the file. Every key without an hfsdk
    counterpart is listed, one per line, with the reason.

    \b
        hfsdk config import --from verl run_qwen2-7b.sh --out run.yaml
        hfsdk config import --from verl ppo_trainer.yaml data.train_batch_size=32
        hfsdk config import --from trl grpo_config.json --out run.yaml
        hfsdk config import --from trl --learning_rate 1e-6 --num_generations 8
        hfsdk config import --from openrlhf train_ppo.sh --out run.yaml
    """
    from hfsdk import ConfigError, write_text_atomic
    from hfsdk_migration.importing import import_config, read_source

    files, rest = _split_file(source, args)
    if len(files) > 1:
        raise ConfigError(f"give one config FILE, got {files}; the rest must be KEY=VALUE")
    if not files and not rest:
        raise ConfigError("give a config FILE and/or arguments to import")
    if out and files and Path(out).resolve() == Path(files[0]).resolve():
        raise ConfigError(
            f"--out {out!r} is the file being imported; write the hfsdk config elsewhere "
            "(the source would be lost)"
        )
    data, warnings = read_source(
        source, files[0] if files else None, rest, verl_config_dir=list(verl_config_dir)
    )
    result = import_config(source, data, algo=algo, warnings=warnings)
    for line in result.warnings:
        click.echo(f"warning: {line}", err=True)
    if out:
        write_text_atomic(out, result.to_yaml())
        click.echo(f"wrote {out} (algo {result.config['algo']})")
    else:
        click.echo(result.to_yaml(), nl=False)
    if result.unmapped:
        click.echo(f"{len(result.unmapped)} {source} key(s) not mapped:", err=not out)
        for line in result.unmapped:
            click.echo(f"  {line}", err=not out)
