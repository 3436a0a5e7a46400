"""The ``frozen_lake`` task's registry entry: its assets (built on first use) and settings.

Kept apart from :mod:`frozen_lake_task` (the task's text and rows), which the warm
start imports, so that the builder and the task do not import each other.
"""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk_agents.environments.frozen_lake_build import ensure_frozen_lake_assets
from hfsdk_agents.environments.frozen_lake_task import frozen_lake_preset


def _assets(model: str = "warm", data: str = "prompts") -> hfsdk.TaskAssets:
    root = ensure_frozen_lake_assets()
    return hfsdk.TaskAssets(
        model_dir=root / "model",
        tokenizer_dir=root / "model",
        train_files=(str(root / "train.jsonl"),),
        val_files=(str(root / "val.jsonl"),),
        root=root,
    )


def _settings() -> dict[str, Any]:
    return frozen_lake_preset(ensure_frozen_lake_assets())


def frozen_lake_task() -> hfsdk.Task:
    """The registry entry of the ``frozen_lake`` task."""
    return hfsdk.Task(
        summary="walk gymnasium's FrozenLake to the goal with a move tool (docs/agents.md)",
        assets=_assets,
        settings=_settings,
        signals={"reward": ("environment",)},
    )
