"""Options shared by commands that take a run config."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import click


def run_config_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--algo``, ``--config`` and trailing ``key.sub=value`` overrides."""
    func = click.argument("overrides", nargs=-1, metavar="[KEY.SUB=VALUE]...")(func)
    func = click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        default=None,
        help="YAML config file (overrides on the command line win).",
    )(func)
    return click.option("--algo", default=None, help="Algorithm name (hfsdk list algorithms).")(
        func
    )


def task_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--task``: which registered task a config without data runs (``hfsdk list tasks``)."""
    from hfsdk.core.tasks import DEFAULT_TASK

    return click.option(
        "--task",
        default=DEFAULT_TASK,
        metavar="NAME",
        help="Built-in task a config without data runs, as plugins register them "
        "(hfsdk list tasks: the addition task 'default', a multi-turn tool task, ...).",
    )(func)


def task_base(
    task: str, algo: str | None = None, file_data: Mapping | None = None, overrides: Any = ()
) -> dict[str, Any] | None:
    """The settings ``task`` puts under the user's config (``None``: the default task, which
    runs as the fallback of a config without data), less what the algorithm (``algo``, else the
    ``file_data``'s or an override's) has no use for: sections of roles it lacks (DAPO: no
    ``reference``), ``algorithm`` keys its config lacks, a sample count where it samples none."""
    from hfsdk.core.config.loader import parse_override
    from hfsdk.core.config.presets import keys_for
    from hfsdk.core.plugin_manager import get_registry
    from hfsdk.core.tasks import DEFAULT_TASK, get_task

    if task == DEFAULT_TASK:
        return None  # looked up only when the run needs its assets (it may name its own)
    settings, specs = get_task(task).settings, get_registry("algorithms")
    base = dict(settings()) if settings is not None else None
    named = [value for keys, value in map(parse_override, overrides) if keys == ["algo"]]
    algo = algo or (named or [(file_data or {}).get("algo")])[-1]
    if base is None or not isinstance(algo, str) or specs.get(algo) is None:
        return base  # an unknown algorithm: resolve_run_config names it
    spec = specs[algo].impl
    lacks = {r.name for e in specs.values() for r in e.impl.roles} - set(spec.role_names)
    base = {section: values for section, values in base.items() if section not in lacks}
    unread = set() if spec.has_policy and spec.trains_on_generations else {"n_samples_per_prompt"}
    if "algorithm" in base:  # the preset's keys only: the user's own are checked, never dropped
        kept = keys_for(spec.config_cls, base["algorithm"]).items()
        base["algorithm"] = {key: value for key, value in kept if key not in unread}
    return base
