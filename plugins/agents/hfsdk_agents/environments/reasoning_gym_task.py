"""The ``reasoning_gym`` task as the task registry sees it (``hfsdk run --task reasoning_gym``).

Single-turn: reasoning-gym's ``basic_arithmetic`` (two one-digit terms, ``+``/``-``)
generated offline, scored by the ``reasoning_gym`` reward (the task's own verifier).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hfsdk


def reasoning_gym_preset(root: Path) -> dict[str, Any]:
    """What ``--task reasoning_gym`` puts under the user's config."""
    return {
        "data": {
            "train_files": [str(root / "train.jsonl")],
            "val_files": [str(root / "val.jsonl")],
            "batch_size": 8,
            "max_prompt_length": 8,
        },
        "trainer": {"total_steps": 10},
        "actor": {"model_path": str(root / "model"), "optim": {"lr": 1e-3}},
        "reward": {"functions": [{"name": "reasoning_gym"}]},
        "rollout": {"max_response_length": 4},
    }


def _root() -> Path:
    from hfsdk_agents.environments.reasoning_gym_build import ensure_reasoning_gym_assets

    return ensure_reasoning_gym_assets()


def _assets(model: str = "warm", data: str = "prompts") -> hfsdk.TaskAssets:
    root = _root()
    return hfsdk.TaskAssets(
        model_dir=root / "model",
        tokenizer_dir=root / "model",
        train_files=(str(root / "train.jsonl"),),
        val_files=(str(root / "val.jsonl"),),
        root=root,
    )


def reasoning_gym_task() -> hfsdk.Task:
    """The registry entry of the ``reasoning_gym`` task."""
    return hfsdk.Task(
        summary="reasoning-gym's basic_arithmetic, generated offline, scored by its verifier",
        assets=_assets,
        settings=lambda: reasoning_gym_preset(_root()),
        signals={"reward": ("reasoning_gym",)},
    )
