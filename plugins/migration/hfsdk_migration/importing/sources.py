"""What ``hfsdk config import`` reads: a YAML/JSON file, a launch script, or arguments.

:func:`read_source` returns the source project's config as one nested
mapping plus warnings:

- verl: a YAML (composed when it has a ``defaults:`` list), or a script /
  list of Hydra overrides on top of ``--config-name`` (``ppo_trainer`` by
  default), composed by Hydra (:mod:`~hfsdk_migration.importing.verl_compose`)
  from verl's config directory when one is given or installed, else from
  :mod:`~hfsdk_migration.importing.verl_defaults`;
- TRL: a ``GRPOConfig``/``PPOConfig`` YAML/JSON, or a ``TrlParser`` command line
  (``trl grpo ...``, ``python train.py --learning_rate 1e-6 ...``, ``accelerate
  launch ...``; ``--config FILE`` is read first);
- OpenRLHF: a ``python -m openrlhf.cli.train_ppo_ray ...`` command line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hfsdk import ConfigError, load_yaml_text, read_config_text
from hfsdk_migration.importing import verl_compose
from hfsdk_migration.importing.shell import (
    Script,
    UnclosedQuoteError,
    arguments_after,
    split_script,
)
from hfsdk_migration.importing.verl_defaults import default_tree

_YAML_SUFFIXES = (".yaml", ".yml", ".json")


def _as_mapping(path: Path, text: str) -> dict[str, Any] | None:
    """The file as a YAML mapping, or ``None`` when it is a script or a list of arguments."""
    if path.suffix in (".sh", ".bash"):
        return None
    try:
        data = load_yaml_text(text, source=f"config file {str(path)!r}")
    except yaml.YAMLError as exc:
        if path.suffix in _YAML_SUFFIXES:
            raise ConfigError(f"config file {str(path)!r} is not valid YAML: {exc}") from exc
        return None
    if isinstance(data, dict):
        return data
    if path.suffix in _YAML_SUFFIXES and data is not None:
        raise ConfigError(
            f"config file {str(path)!r} must hold a mapping, got {type(data).__name__}"
        )
    return {} if data is None and path.suffix in _YAML_SUFFIXES else None


def _read(path: str) -> tuple[Path, str]:
    file = Path(path).expanduser()
    hint = "a verl config directory goes to --verl-config-dir"
    return file, read_config_text(file, shown=path, directory_hint=hint)


def _check_config_dirs(dirs: list[str]) -> None:
    """Refuse an alias bomb in a config directory before Hydra reads it (it has no bound)."""
    for directory in dirs:
        for file in sorted(Path(directory).expanduser().rglob("*.yaml")):
            try:
                text = file.read_text(errors="replace")
                load_yaml_text(text, source=f"config file {str(file)!r}")
            except (yaml.YAMLError, OSError):
                continue  # not ours to judge: Hydra reports a file it needs and cannot read


def _split(path: str, text: str, env: Mapping[str, str] | None) -> Script:
    try:
        return split_script(text, env)
    except UnclosedQuoteError as exc:
        raise ConfigError(f"{path!r}: {exc}; nothing was written") from None


# -- verl ---------------------------------------------------------------------------------


def _is_verl(words: list[str], i: int) -> bool:
    word = words[i]
    if word.endswith(("main_ppo.py", "main_dapo.py")):
        return True
    return i > 0 and words[i - 1] == "-m" and word.rpartition(".")[2] in ("main_ppo", "main_dapo")


def _verl_arguments(script: Script, path: str) -> list[str]:
    found = arguments_after(script, _is_verl, what="verl.trainer.main_ppo")
    if found is not None:
        return found[1]
    words = [w for command in script.commands for w in command]
    if words and all("=" in w or w.startswith("-") for w in words):
        return words
    raise ConfigError(
        f"{path!r} has no 'python3 -m verl.trainer.main_ppo ...' command and is not a list of "
        "key=value overrides; pass a verl YAML, launch script or override list"
    )


def _without_unset(arguments: list[str], script: Script, warnings: list[str]) -> list[str]:
    """Overrides whose value names a variable the script leaves unset are left out, by name."""
    kept = []
    for word in arguments:
        key, _, value = word.partition("=")
        names = [n for n in script.unset if re.search(rf"\$\{{?{n}\b", value)]
        if names:
            warnings.append(
                f"{key} left out: its value {value!r} uses ${names[0]}, which is not set here "
                f"(set it, or pass {key}=VALUE)"
            )
        else:
            kept.append(word)
    return kept


def read_verl(
    path: str | None,
    overrides: list[str],
    *,
    config_dir: str | list[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """verl's config from ``path`` (YAML or launch script) and ``overrides``, composed.

    ``config_dir``: directories of verl configs searched in order (then an installed
    verl's); without any, :func:`~.verl_defaults.default_tree` is the base.
    """
    dirs = [config_dir] if isinstance(config_dir, str) else list(config_dir or [])
    _check_config_dirs(dirs)
    warnings: list[str] = []
    config_name = "ppo_trainer"
    data: dict[str, Any] | None = None
    arguments: list[str] = []
    if path is not None:
        file, text = _read(path)
        data = _as_mapping(file, text)
        if data is None:
            script = _split(path, text, env)
            warnings.extend(script.warnings)
            arguments = _without_unset(_verl_arguments(script, path), script, warnings)
    arguments = [*arguments, *overrides]
    hydra_overrides = []
    words = iter(arguments)
    for word in words:
        if word in ("--config-name", "-cn", "--config-path", "-cp"):
            value = next(words, "")
            word = f"{word}={value}"
        if word.startswith(("--config-name=", "-cn=")):
            config_name = word.partition("=")[2].removesuffix(".yaml")
        elif word.startswith(("--config-path=", "-cp=")):
            # Relative to verl's trainer/ (where verl's own "config" is), or an absolute path.
            given = Path(word.partition("=")[2]).expanduser()
            if given.is_absolute() and given.is_dir():
                dirs.insert(0, str(given))
            elif given.is_absolute():
                warnings.append(f"--config-path {str(given)!r} is not on this machine")
        elif "=" in word or word.startswith("~"):
            hydra_overrides.append(word)
        else:
            warnings.append(f"argument {word!r} is not a key=value override; ignored")
    layered = data is None or "defaults" in data  # on verl's tree; else the file is the whole
    installed = verl_compose.installed_config_dir()
    roots = [Path(d) for d in (*dirs, installed) if d is not None]
    if not roots and layered:
        warnings.append(
            f"composed on hfsdk's copy of verl's {config_name} defaults for the keys it maps "
            "(pass --verl-config-dir verl/trainer/config for verl's whole tree)"
        )
    composed = verl_compose.compose(
        roots if layered else [],
        config_name,
        hydra_overrides,
        primary=data,
        fallback=default_tree(config_name) if layered else None,
        source=path,
    )
    return composed, warnings


# -- TRL and OpenRLHF ----------------------------------------------------------------------

_NUMBER = re.compile(r"^[-+]?(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$", re.I)


def parse_literal(text: str) -> Any:
    """A flag's value as argparse with a typed field would read it: number, bool, null, list, text.

    YAML alone would keep ``1e-6`` a string (YAML 1.1 floats need a dot).
    """
    text = text.strip()
    if _NUMBER.match(text):
        return (
            int(text.replace("_", ""))
            if text.lstrip("+-").replace("_", "").isdigit()
            else (float(text.replace("_", "")))
        )
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        value = load_yaml_text(text, source=f"the value {text[:40]!r}")
    except yaml.YAMLError:
        return text
    return value if value is None or isinstance(value, bool | list | dict) else text


def _flag_value(text: str) -> Any:
    """A flag's value as :func:`parse_literal` reads it, but an empty one (``--key=``,
    ``--key ''``) stays ``''`` as argparse keeps it: YAML would read it as null, and an
    unset key would silently take the source's default instead of being refused."""
    return text if not text.strip() else parse_literal(text)


def parse_flags(words: list[str], *, negations: bool = True) -> dict[str, Any]:
    """``--key value`` / ``--key=value`` / ``--flag`` (True) / ``--no_flag`` (False) words.

    ``key=value`` words (the old way to override a file's keys) are taken too. Without
    ``negations`` a bare ``--no_flag`` is the flag ``no_flag`` (True): OpenRLHF's argparse
    makes no ``--no_`` negations, and its ``--no_advantage_std_norm`` is a flag of its own.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--") and "=" in word:  # key=value, as in a config file
            key, _, raw = word.partition("=")
            out[key.strip()] = _flag_value(raw)
            continue
        if not word.startswith("--") or word == "--":
            raise ConfigError(
                f"argument {word!r} is not a --flag; expected --name [value] or name=value"
            )
        key, sep, raw = word[2:].partition("=")
        key = key.replace("-", "_")
        values: list[str] = [raw] if sep else []
        while not sep and i < len(words) and not words[i].startswith("--"):
            values.append(words[i])
            i += 1
        if not values:
            if negations and key.startswith("no_"):
                out[key.removeprefix("no_")] = False
            else:
                out[key] = True
            continue
        parsed = [_flag_value(v) for v in values]
        out[key] = parsed[0] if len(parsed) == 1 else parsed
    return out


PROCESSES = "num_processes"
"""The key the launcher's process count reaches the TRL mapper under (``accelerate launch
--num_processes N``, ``torchrun --nnodes N --nproc_per_node M``: N·M): TRL's batches are
per process."""

NODES = "num_machines"
"""The key the launcher's node count reaches the TRL mapper under (accelerate's name)."""

_LAUNCHER_FLAGS = ("num_processes", "num_machines", "config_file", "nproc_per_node", "nnodes")


def _launcher_flags(words: list[str]) -> dict[str, str]:
    """The launcher's flags that count processes, by accelerate's/torchrun's name (``_``)."""
    flags = {}
    for index, word in enumerate(words):
        name, eq, value = word.partition("=")
        key = name.removeprefix("--").replace("-", "_")
        if name.startswith("--") and key in _LAUNCHER_FLAGS:
            flags[key] = value if eq else (words[index + 1] if index + 1 < len(words) else "")
    return flags


def _count(text: str) -> int | None:
    """A whole count; an elastic ``min:max`` range counts only when both ends agree."""
    low, _, high = text.partition(":")
    if low.isdigit() and (not high or high == low):
        return int(low)
    return None


def _accelerate_file(name: str, script_dir: Path) -> tuple[int | None, int | None]:
    """``num_processes`` and ``num_machines`` of an accelerate config file, where readable.

    A relative path is tried from here, then from the launch script's directory.
    """
    path = Path(name).expanduser()
    candidates = [path] if path.is_absolute() else [path, script_dir / path]
    for candidate in candidates:
        try:
            data = load_yaml_text(candidate.read_text(), source=f"config file {name!r}")
        except (OSError, UnicodeDecodeError, yaml.YAMLError, ConfigError):
            continue
        if isinstance(data, dict):
            return _positive(data.get("num_processes")), _positive(data.get("num_machines"))
    return None, None


def _positive(value: Any) -> int | None:
    # YAML's true is an int to Python, but no count.
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _unknown_processes(what: str, example: str) -> str:
    """The warning for a launcher whose process count is not written in the command."""
    return (
        f"the launcher's {what} gives no process count here, so the TRL batch sizes assume 1 "
        f"process; write the count in the launch command (e.g. {example}) or set "
        "actor.mini_batch_size, data.batch_size and placement.pools.global.devices by hand"
    )


def _launcher_processes(
    words: list[str], script_dir: Path
) -> tuple[int | None, int | None, str | None]:
    """The processes and nodes the launcher words before the script ask for (``None``:
    not said), and a warning when they ask for a count that cannot be read here."""
    flags = _launcher_flags(words)
    if "nproc_per_node" in flags or "nnodes" in flags:  # torchrun: processes per node
        per_node = _count(flags.get("nproc_per_node", "1"))
        nodes = _count(flags.get("nnodes", "1"))
        if per_node is not None and nodes is not None:
            return per_node * nodes, nodes, None
        given = " ".join(f"--{k}={flags[k]}" for k in ("nnodes", "nproc_per_node") if k in flags)
        return None, None, _unknown_processes(f"torchrun {given}", "--nproc_per_node 8")
    nodes = _count(flags.get("num_machines", ""))
    if "num_processes" in flags:  # accelerate: processes over all machines
        processes = _count(flags["num_processes"])
        what = f"--num_processes={flags['num_processes']}"
    elif "config_file" in flags:
        processes, machines = _accelerate_file(flags["config_file"], script_dir)
        nodes = nodes or machines
        what = f"--config_file {flags['config_file']} (unreadable here or no num_processes)"
    elif any(Path(word).name == "accelerate" for word in words):
        # Bare `accelerate launch` takes its count from the launching machine's default config.
        what = "`accelerate launch` without --num_processes or --config_file"
        return None, None, _unknown_processes(what, "--num_processes 8")
    else:
        return None, None, None
    if processes is None:
        return None, None, _unknown_processes(what, "--num_processes 8")
    return processes, nodes, None


def _is_trl(words: list[str], i: int) -> bool:
    word = words[i]
    if word == "trl" and i + 1 < len(words) and not words[i + 1].startswith("-"):
        return False  # the subcommand (grpo, ppo, ...) is the program
    if i > 0 and words[i - 1] == "trl":
        return True
    return word.endswith(".py") and not word.startswith("-")


def _is_openrlhf(words: list[str], i: int) -> bool:
    word = words[i]
    if word.endswith("train_ppo_ray.py"):
        return True
    return i > 0 and words[i - 1] in ("-m", "--module") and word.startswith("openrlhf.")


def read_flags(
    source: str,
    path: str | None,
    arguments: list[str],
    *,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """A TRL or OpenRLHF config from a YAML/JSON file and/or a command line of ``--flags``."""
    warnings: list[str] = []
    data: dict[str, Any] = {}
    words: list[str] = []
    if path is not None:
        file, text = _read(path)
        mapping = _as_mapping(file, text)
        if mapping is not None:
            data = mapping
        else:
            script = _split(path, text, env)
            warnings.extend(script.warnings)
            test = _is_trl if source == "trl" else _is_openrlhf
            what = "a TRL training script" if source == "trl" else "openrlhf.cli.train_ppo_ray"
            found = arguments_after(script, test, what=what)
            if found is not None:
                words = found[1]
                processes, nodes, unknown = _launcher_processes(
                    found[0], Path(path).expanduser().parent
                )
                if source == "trl" and processes is not None:
                    data[PROCESSES] = processes
                    if nodes is not None and nodes > 1:
                        data[NODES] = nodes
                if source == "trl" and unknown is not None:
                    warnings.append(unknown)
            else:
                words = [w for command in script.commands for w in command]
                if not words or not words[0].startswith("--"):
                    raise ConfigError(
                        f"{path!r} runs no {what} and is not a list of --flags; pass a config "
                        "file, a launch script or the command line"
                    )
    words = [*words, *arguments]
    # TRL's HfArgumentParser adds --no_X for its boolean fields; OpenRLHF's argparse does not.
    flags = parse_flags(words, negations=source == "trl") if words else {}
    config_file = flags.pop("config", None)
    if config_file is not None:
        loaded = _as_mapping(*_read(str(config_file)))
        if loaded is None:
            raise ConfigError(f"--config {config_file!r} is not a YAML/JSON mapping")
        data = {**loaded, **data}
    data.update(flags)
    return data, warnings
