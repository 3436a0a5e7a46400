"""What a task is (:class:`Task`, :class:`TaskAssets`) and where tasks cache what they build.

Plain types with no registry access, so a plugin module (the core's own included)
can build a task without importing the plugin manager; the lookups are in
:mod:`hfsdk.core.tasks`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from hfsdk.core.errors import HfsdkError

DEFAULT_TASK = "default"
"""The task of a run whose config names no training data."""

CACHE_ENV = "HFSDK_CACHE_DIR"
"""Where tasks cache what they build (default ``~/.cache/hfsdk``)."""


@attrs.frozen(kw_only=True)
class TaskAssets:
    """Concrete paths of a task's model, tokenizer and data (built on first use, cached)."""

    model_dir: Path
    tokenizer_dir: Path
    train_files: tuple[str, ...] = attrs.field(converter=tuple)
    val_files: tuple[str, ...] = attrs.field(converter=tuple)
    root: Path | None = None
    """The task's cache directory, where a plugin may write files it derives from the task
    (e.g. the reward-model plugin's preference pairs), or ``None``."""
    spec: Any = None
    """The task's own parameters (the default task: its ``DefaultTaskSpec``), for a plugin
    that derives data from them; ``None`` when the task has none to share."""


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
    - ``model_config(model)``: the ``config.json`` values (Hugging Face names:
      ``hidden_size``, ``num_attention_heads``, ...) of a model variant, known
      without building it, so a config check costs nothing; ``None``: read from
      the built model.
    """

    summary: str
    assets: Callable[..., TaskAssets]
    models: tuple[str, ...] = attrs.field(default=("warm",), converter=tuple)
    data: tuple[str, ...] = attrs.field(default=("prompts",), converter=tuple)
    preset: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    settings: Callable[[], Mapping[str, Any]] | None = None
    signals: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_signal_names)
    model_config: Callable[[str], Mapping[str, Any]] | None = None

    def build(self, model: str = "warm", data: str = "prompts") -> TaskAssets:
        """:attr:`assets` for a model variant and data kind this task offers (else one line)."""
        if model not in self.models:
            raise HfsdkError(
                f"this task has no {model!r} model; it offers {', '.join(self.models)}"
            )
        if data not in self.data:
            raise HfsdkError(f"this task has no {data!r} data; it offers {', '.join(self.data)}")
        return self.assets(model=model, data=data)


def cache_root() -> Path:
    """``$HFSDK_CACHE_DIR`` or ``~/.cache/hfsdk``: the root every task builds its assets under
    (each in its own sub-directory)."""
    value = os.environ.get(CACHE_ENV)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "hfsdk"


def task_entry(plugin: str, name: str, task: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """A registered task's entry extras: ``task`` must be a :class:`Task` (else one line);
    its ``summary`` is what ``hfsdk list tasks`` shows."""
    if not isinstance(task, Task):
        raise HfsdkError(
            f"plugin {plugin!r} registered task {name!r} as {type(task).__name__}; expected an "
            "hfsdk.Task (summary, assets, ...): see docs/plugin_hooks.md#hfsdk_register_tasks"
        )
    return {"doc": task.summary, **extra}
