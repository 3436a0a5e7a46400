"""Where each value of a run config came from, and the task preset a config drops.

A run config is layered (later wins): the config classes' defaults, the
algorithm's default-task preset (only when the config names no training data),
a built-in task (``--task``), the ``--config`` file (``imported`` when
``hfsdk config import`` wrote it) and the command line's overrides.
:class:`ConfigLayers` keeps the layers apart so ``hfsdk config show --explain``
and a run's ``config_sources.yaml`` can name the layer of every key, and so a
run can say in one line when a preset it would have used is dropped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from hfsdk.core.config.loader import apply_overrides, load_yaml, parse_override

SOURCES_FILE = "config_sources.yaml"
_IMPORT_HEADER = "# hfsdk run config imported from "


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); other values
    (lists included) are leaves."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _imported_from(path: str) -> str | None:
    """The project an ``hfsdk config import`` file came from (its header says), else ``None``."""
    try:
        first = Path(path).read_text().splitlines()[:1]
    except (OSError, UnicodeDecodeError):
        return None
    if first and first[0].startswith(_IMPORT_HEADER):
        return first[0][len(_IMPORT_HEADER) :].split()[0]
    return None


@attrs.frozen(kw_only=True)
class ConfigLayers:
    """The raw layers of one run config, before resolution (see the module docstring)."""

    algo: str | None
    file: str | None = None
    file_data: Mapping[str, Any] = attrs.Factory(dict)
    task: str | None = None
    task_data: Mapping[str, Any] = attrs.Factory(dict)
    overrides: Sequence[str] = ()

    @classmethod
    def read(
        cls,
        algo: str | None,
        config_file: str | None = None,
        overrides: Sequence[str] = (),
        *,
        base: Mapping[str, Any] | None = None,
        task: str | None = None,
        file_data: Mapping[str, Any] | None = None,
    ) -> ConfigLayers:
        """The layers :func:`~hfsdk.core.config.load_run_config` merges from the same inputs
        (``file_data``: the file's mapping, already read: a pipe reads empty a second time)."""
        from hfsdk.core.config.run_config import with_wandb_moved  # (each layer: a later one wins)

        if file_data is None:
            file_data = load_yaml(config_file) if config_file else {}
        return cls(
            algo=algo,
            file=config_file,
            file_data=with_wandb_moved(file_data),
            task=task if base else None,
            task_data=with_wandb_moved(base or {}),
            overrides=tuple(overrides),
        )

    def user_data(self) -> dict[str, Any]:
        """Task, file and overrides merged (what the preset goes under)."""
        from hfsdk.core.config.presets import deep_merge

        data = dict(self.file_data)
        if self.task_data:
            data = deep_merge(self.task_data, data)
        return apply_overrides(data, list(self.overrides))

    def _algo(self, data: Mapping[str, Any]) -> str | None:
        return self.algo or data.get("algo")

    def preset_values(self, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Dotted key -> value of what the default-task preset adds under ``data``."""
        from hfsdk.core.config.run_config import with_algorithm_preset

        data = self.user_data() if data is None else data
        merged = flatten(with_algorithm_preset(self._algo(data), data))
        given = flatten(data)
        return {k: v for k, v in merged.items() if k not in given}

    def sources(self) -> dict[str, str]:
        """Dotted key -> the layer that set it; a key not listed has its default."""
        out: dict[str, str] = {}

        def put(key: str, where: str) -> None:  # (load_run_config moves the old key to data's)
            out[key] = where
            if key == "rollout.max_prompt_length":
                out["data.max_prompt_length"] = f"{where} (as rollout.max_prompt_length)"

        for key in self.preset_values():
            out[key] = "task preset (the built-in task's settings for this algorithm)"
        if self.task_data:
            for key in flatten(self.task_data):
                put(key, f"task (--task {self.task})")
        if self.file:
            project = _imported_from(self.file)
            where = f"imported from {project} ({self.file})" if project else f"file {self.file}"
            for key in flatten(self.file_data):
                put(key, where)
        for text in self.overrides:
            keys, value = parse_override(text)
            name = ".".join(keys)
            inner = flatten(value, f"{name}.") if isinstance(value, Mapping) and value else {}
            for key in [k for k in out if k == name or k.startswith(f"{name}.")]:
                del out[key]  # the override replaces what was under it
            for key in inner or {name: value}:
                put(key, "command line")
        if self.algo:  # --algo names it (a file's algo: may only repeat it)
            out["algo"] = "--algo"
        return out

    def dropped_preset(self) -> str | None:
        """One line when the default task's preset is not applied although the built-in
        model runs (the config names training data but no model), else ``None``."""
        from hfsdk.core.config.presets import uses_default_task

        data = self.user_data()
        if uses_default_task(data):
            return None
        algo = self._algo(data)
        policy_section = data.get("actor") if isinstance(data.get("actor"), Mapping) else {}
        if not isinstance(algo, str) or (policy_section or {}).get("model_path"):
            return None
        own_data = {k: v for k, v in data["data"].items() if k != "train_files"}
        dropped = self.preset_values({**data, "data": own_data})
        dropped.pop("data.train_files", None)  # the user's own stands in for the preset's
        if not dropped:
            return None
        shown = ", ".join(f"{k}={v}" for k, v in dropped.items())
        return (
            f"data.train_files is set, so the built-in task's preset for {algo} ({shown}) "
            "is not applied and the built-in model trains with the generic defaults; set those "
            "keys yourself if you want them (hfsdk config show --explain says where each value "
            "comes from)"
        )
