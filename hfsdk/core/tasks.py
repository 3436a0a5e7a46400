"""The task registry: what a run trains on when its config names no data.

A plugin registers a :class:`Task` through ``hfsdk_register_tasks``
(``register(name, task)``). The core never names a task's module: ``hfsdk run
--task NAME`` lists the registered names, a run without ``data.train_files``
takes the assets of the task named :data:`DEFAULT_TASK`, and a role without
``model_path`` loads that task's model (:func:`default_model_dir`), so backends
and plugins reach the built-in model through this registry, never through the
plugin that builds it. The built-in tasks ship in ``hfsdk-plugin-tasks``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    from hfsdk.core.plugin_manager import HfsdkPluginManager

DEFAULT_TASK = "default"
"""The task of a run whose config names no training data."""

TASKS_DISTRIBUTION = "hfsdk-plugin-tasks"
"""The distribution that registers the built-in tasks (named in the missing-task line)."""


@attrs.frozen(kw_only=True)
class TaskAssets:
    """Concrete paths of a task's model, tokenizer and data (built on first use, cached)."""

    model_dir: Path
    tokenizer_dir: Path
    train_files: tuple[str, ...]
    val_files: tuple[str, ...]


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


def _signal_names(value: Mapping[str, Any]) -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType({role: tuple(names) for role, names in value.items()})


@attrs.frozen(kw_only=True)
class Task:
    """A built-in task a plugin registers with ``hfsdk_register_tasks``.

    - ``summary``: one line for ``hfsdk run --help`` and ``hfsdk list tasks``.
    - ``assets(model, data)``: returns :class:`TaskAssets`, building the model,
      tokenizer and data files on first use. ``model`` is one of ``models``
      (``warm``: the model RL starts from; ``cold``: the same architecture,
      freshly initialised; others as the task documents), ``data`` one of
      ``data`` (``prompts``; ``preference_pairs`` for pairwise trainers). The
      algorithm's ``AlgorithmSpec.default_model`` / ``default_data`` choose.
    - ``preset``: the task's settings of the core's own sections (``trainer``,
      ``data``), merged under the algorithm's preset when a run uses this task.
    - ``settings()``: the config layer ``hfsdk run --task NAME`` puts under the
      user's config (its data, model and any section it needs), or ``None`` for
      a task that runs as the no-data fallback (:data:`DEFAULT_TASK`).
    - ``signals``: signal section -> the reward function names that score it
      when the config names none (``{"reward": ("default_task",)}``).
    """

    summary: str
    assets: Callable[..., TaskAssets]
    models: tuple[str, ...] = attrs.field(default=("warm",), converter=tuple)
    data: tuple[str, ...] = attrs.field(default=("prompts",), converter=tuple)
    preset: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    settings: Callable[[], Mapping[str, Any]] | None = None
    signals: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_signal_names)

    def build(self, model: str = "warm", data: str = "prompts") -> TaskAssets:
        """:attr:`assets` for a model variant and data kind this task offers (else one line)."""
        if model not in self.models:
            raise HfsdkError(
                f"this task has no {model!r} model; it offers {', '.join(self.models)}"
            )
        if data not in self.data:
            raise HfsdkError(f"this task has no {data!r} data; it offers {', '.join(self.data)}")
        return self.assets(model=model, data=data)


def task_names(pm: HfsdkPluginManager | None = None) -> list[str]:
    """The registered task names, sorted."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    return list((pm or get_plugin_manager()).registry("tasks"))


def get_task(name: str = DEFAULT_TASK, pm: HfsdkPluginManager | None = None) -> Task:
    """The registered task ``name``; one line naming the distribution when none is."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    registry = (pm or get_plugin_manager()).registry("tasks")
    entry = registry.get(name)
    if entry is None:
        known = ", ".join(registry) or "none"
        raise HfsdkError(
            f"no task {name!r} is registered (registered: {known}); install "
            f"{TASKS_DISTRIBUTION} for the built-in tasks, or give the run its own data and "
            "model (data.train_files=[...], actor.model_path=DIR)"
        )
    task: Task = entry.impl
    return task


def default_task_assets(model: str = "warm", data: str = "prompts") -> TaskAssets:
    """The assets of :data:`DEFAULT_TASK` (built on first use)."""
    return get_task(DEFAULT_TASK).build(model=model, data=data)


def default_model_dir(model: str = "warm") -> Path:
    """The default task's model directory: what a role without ``model_path`` loads."""
    return default_task_assets(model=model).model_dir
