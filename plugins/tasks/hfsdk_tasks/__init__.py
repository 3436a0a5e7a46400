"""The built-in default task: what ``hfsdk run --algo X`` trains when given nothing else.

A tiny Llama model (a few hundred thousand parameters) with a locally trained
tokenizer, warm-started on single-digit addition so that RL improves it within
a short CPU run; a rule-based reward (right answer) and cost (filler word).
See ``docs/default_task.md``.
"""

from __future__ import annotations

from hfsdk_tasks.assets import (
    DefaultAssets,
    build_prompt_dataset,
    cache_root,
    ensure_default_assets,
    load_prompt_dataset,
)
from hfsdk_tasks.build_once import build_once, holds, quiet_progress_bars
from hfsdk_tasks.spec import DefaultTaskSpec
from hfsdk_tasks.task import (
    COST_FUNCTION_NAME,
    REWARD_FUNCTION_NAME,
    default_task_cost,
    default_task_reward,
    first_number,
)

__all__ = [
    "COST_FUNCTION_NAME",
    "REWARD_FUNCTION_NAME",
    "DefaultAssets",
    "DefaultTaskSpec",
    "build_once",
    "build_prompt_dataset",
    "cache_root",
    "default_task_cost",
    "default_task_reward",
    "ensure_default_assets",
    "first_number",
    "holds",
    "load_prompt_dataset",
    "quiet_progress_bars",
]
