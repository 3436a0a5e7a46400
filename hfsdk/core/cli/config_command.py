"""``hfsdk config show``: the resolved run config as YAML.

Plugins add subcommands to the group (``hfsdk config import`` comes with hfsdk-plugin-migration)."""

from __future__ import annotations

import click

from hfsdk.core.cli.known_commands import PluginCommandGroup
from hfsdk.core.cli.options import run_config_options, task_base, task_option
from hfsdk.core.cli.run_command import DEFAULT_TASK_NOTE


@click.group(cls=PluginCommandGroup)
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
    algo: str | None, config_file: str | None, overrides: tuple[str, ...], task: str, explain: bool
) -> None:
    """Print the resolved config (defaults + task + file + overrides) as YAML."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.config.loader import load_yaml
    from hfsdk.core.config.sources import ConfigLayers

    keys = [arg for arg in overrides if "=" not in arg]
    if keys and not explain:  # a key to look at, or a piece of an override the shell split
        from hfsdk.core.config.loader import shell_split_hint
        from hfsdk.core.errors import ConfigError

        key, at = keys[0], overrides.index(keys[0])
        hint = shell_split_hint(overrides[at - 1].partition("=")[2]) if at else ""
        if not hint and key.replace(".", "_").isidentifier():  # a key, such as actor.optim.lr
            hint = f"; to look at one key use `hfsdk config show --explain {key}`"
        raise ConfigError(f"{key!r} is not of the form key.sub=value{hint}")
    overrides = tuple(arg for arg in overrides if "=" in arg)
    data = load_yaml(config_file) if config_file else {}  # once: a pipe reads empty the next time
    base = task_base(task, algo, data, overrides)
    config = load_run_config(algo, config_file, overrides, base=base, file_data=data)
    from hfsdk.core.config.run_config import check_reward_function_names

    check_reward_function_names(config)  # a name from a plugin that failed to load: exit 2
    layers = ConfigLayers.read(algo, config_file, overrides, base=base, task=task, file_data=data)
    if notice := layers.dropped_preset():
        click.echo(f"note: {notice}", err=True)
    if not config.data.train_files:  # its reward.functions: [] is not what the run scores with
        click.echo(f"note: {DEFAULT_TASK_NOTE}", err=True)
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
        _check_keys(keys, ["algo", *(key for key, _ in entries)])
        entries = [e for e in entries if any(e[0] == k or e[0].startswith(f"{k}.") for k in keys)]
    if not keys or "algo" in keys:  # (the one key outside the sections)
        click.echo(f"algo: {config.algo!r}   (from: {sources.get('algo', '--algo')})")
    section = None
    for key, lines in entries:
        top = key.split(".", 1)[0]
        if not keys and top != section:
            click.echo(f"\n# {top}")
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
            prefix = f"{parent}." if parent else ""  # (sections too: trainr -> trainer)
            siblings = [k.removeprefix(prefix).split(".")[0] for k in known if k.startswith(prefix)]
            close = closest_key(last, siblings)
            hint = f"; did you mean {'.'.join(filter(None, [parent, close]))!r}?" if close else ""
            raise ConfigError(f"config has no key {key!r}{hint}")
