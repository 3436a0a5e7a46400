"""The ``tool_use`` task as the task registry sees it (``hfsdk run --task tool_use``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hfsdk


def _assets(model: str = "warm", data: str = "prompts") -> hfsdk.TaskAssets:
    """The cached build's model, tokenizer and data (built on first use)."""
    from hfsdk_agents.tool_use.build import ensure_tool_use_assets

    root = ensure_tool_use_assets()
    return hfsdk.TaskAssets(
        model_dir=root / "model",
        tokenizer_dir=root / "model",
        train_files=(str(root / "train.jsonl"),),
        val_files=(str(root / "val.jsonl"),),
        root=root,
    )


def _settings() -> Mapping[str, Any]:
    """What ``--task tool_use`` puts under the user's config: data, model, reward, tools."""
    from hfsdk_agents.tool_use.build import ensure_tool_use_assets, tool_use_preset

    return tool_use_preset(ensure_tool_use_assets())


def tool_use_task() -> hfsdk.Task:
    """The registry entry of the ``tool_use`` task."""
    return hfsdk.Task(
        summary="multi-turn addition with an add calculator tool (docs/agents.md)",
        assets=_assets,
        settings=_settings,
        signals={"reward": ("tool_use",)},
    )
