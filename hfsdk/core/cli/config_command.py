"""``hfsdk config show``: the resolved run config as YAML."""

from __future__ import annotations

import click

from hfsdk.core.cli.options import run_config_options, task_base, task_option


@click.group()
def config() -> None:
    """Inspect run configs."""


@config.command()
@run_config_options
@task_option
@click.option(
    "--explain",
    is_flag=True,
    help="Print every key with its value, where the value came from (default, task preset, "
    "task, file, imported, command line) and what it means. Bare KEYs (actor.optim.lr) "
    "among the arguments limit the output to those keys or sections.",
)
def show(
    algo: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    task: str,
    explain: bool,
) -> None:
    """Print the resolved config (defaults + task + file + overrides) as YAML."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.config.sources import ConfigLayers

    keys = [arg for arg in overrides if "=" not in arg]
    overrides = tuple(arg for arg in overrides if "=" in arg)
    if keys and not explain:
        from hfsdk.core.errors import ConfigError

        raise ConfigError(
            f"{keys[0]!r} is not of the form key.sub=value; to look at one key use "
            f"`hfsdk config show --explain {keys[0]}`"
        )
    base = task_base(task)
    config = load_run_config(algo, config_file, overrides, base=base)
    layers = ConfigLayers.read(algo, config_file, overrides, base=base, task=task)
    notice = layers.dropped_preset()
    if notice:
        click.echo(f"note: {notice}", err=True)
    if not explain:
        click.echo(config.to_yaml(), nl=False)
        return
    from hfsdk.core.config.help import explain as explain_section

    sources = layers.sources()
    entries: list[tuple[str, list[str]]] = []
    for name, section in config.sections.items():
        for line in explain_section(name, section, sources):
            if line.startswith("    ") and entries:
                entries[-1][1].append(line)
            else:
                entries.append((line.split(":", 1)[0], [line]))
    if keys:
        _check_keys(keys, [key for key, _ in entries])
        entries = [e for e in entries if any(e[0] == k or e[0].startswith(f"{k}.") for k in keys)]
    else:
        click.echo(f"algo: {config.algo!r}   (from: {sources.get('algo', '--algo')})")
    section = None
    for key, lines in entries:
        top = key.split(".", 1)[0]
        if not keys and top != section:
            click.echo("")
            click.echo(f"# {top}")
            section = top
        for line in lines:
            click.echo(line)


def _check_keys(keys: list[str], known: list[str]) -> None:
    """Each asked-for key names a key or section of the config (one line with a hint if not)."""
    from hfsdk.core.config.converter import closest_key
    from hfsdk.core.errors import ConfigError

    for key in keys:
        if not any(k == key or k.startswith(f"{key}.") for k in known):
            parent, _, last = key.rpartition(".")
            siblings = [k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == parent]
            close = closest_key(last, siblings)
            hint = f"; did you mean {'.'.join(filter(None, [parent, close]))!r}?" if close else ""
            raise ConfigError(f"config has no key {key!r}{hint}")


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


@config.command(
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
    from hfsdk.core.atomic import write_text_atomic
    from hfsdk.core.config.importing import import_config, read_source
    from hfsdk.core.errors import ConfigError

    files, rest = _split_file(source, args)
    if len(files) > 1:
        raise ConfigError(f"give one config FILE, got {files}; the rest must be KEY=VALUE")
    if not files and not rest:
        raise ConfigError("give a config FILE and/or arguments to import")
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
