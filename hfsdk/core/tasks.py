"""The task registry: what a run trains on when its config names no data.

A plugin registers a :class:`~hfsdk.core.task_spec.Task` through
``hfsdk_register_tasks`` (``register(name, task)``). The core never names a
task's module: ``hfsdk run --task NAME`` lists the registered names, a run
without ``data.train_files`` takes the assets of the task named
:data:`DEFAULT_TASK`, and a role without ``model_path`` loads that task's model
(:func:`default_model_dir`), so backends and plugins reach the built-in model
through this registry, never through the plugin that builds it. The built-in
tasks ship in ``hfsdk-plugin-tasks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hfsdk.core.errors import HfsdkError
from hfsdk.core.task_spec import CACHE_ENV, DEFAULT_TASK, Task, TaskAssets, cache_root

if TYPE_CHECKING:
    from pathlib import Path

    from hfsdk.core.plugin_manager import HfsdkPluginManager

__all__ = [
    "CACHE_ENV",
    "DEFAULT_TASK",
    "TASKS_DISTRIBUTION",
    "Task",
    "TaskAssets",
    "cache_root",
    "default_model_config",
    "default_model_dir",
    "default_task_assets",
    "get_task",
    "task_names",
]

TASKS_DISTRIBUTION = "hfsdk-plugin-tasks"
"""The distribution that registers the built-in tasks (named in the missing-task line)."""


def task_names(pm: HfsdkPluginManager | None = None) -> list[str]:
    """The registered task names, sorted."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    return list((pm or get_plugin_manager()).registry("tasks"))


def get_task(name: str = DEFAULT_TASK, pm: HfsdkPluginManager | None = None) -> Task:
    """The registered task ``name``; one line naming the distribution when none is."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    registry = (pm or get_plugin_manager()).registry("tasks")
    entry = registry.get(name)
    if entry is None and name != DEFAULT_TASK and len(registry):
        registry[name]  # a typo: raises the registry's line, with its suggestion
    if entry is None:
        known = ", ".join(registry) or "none"
        failed = registry.explain_missing() if registry.explain_missing else ""
        raise HfsdkError(
            f"no task {name!r} is registered (registered: {known}); install "
            f"{TASKS_DISTRIBUTION} for the built-in tasks, or give the run its own data and "
            f"model (data.train_files=[...], actor.model_path=DIR){failed}"
        )
    return entry.impl


def default_task_assets(model: str = "warm", data: str = "prompts") -> TaskAssets:
    """The assets of :data:`DEFAULT_TASK` (built on first use)."""
    return get_task(DEFAULT_TASK).build(model=model, data=data)


def default_model_dir(model: str = "warm") -> Path:
    """The default task's model directory: what a role without ``model_path`` loads."""
    return default_task_assets(model=model).model_dir


def default_model_config(model: str = "warm") -> dict[str, Any]:
    """The default task's model's ``config.json`` values (without building it where the task
    knows them: :attr:`Task.model_config`)."""
    import json

    task = get_task(DEFAULT_TASK)
    if task.model_config is not None:
        return dict(task.model_config(model))
    return dict(json.loads((task.build(model=model).model_dir / "config.json").read_text()))
