"""Prompt datasets: parquet, jsonl or saved ``datasets`` directories turned into a run's
prompt stream (chat templating, verl's nested columns, the unknown-token check).

The core asks for a run's prompts through ``hfsdk_load_prompts``; this package
answers. Its loader and helpers are public for plugins that read the same data
(``hfsdk data inspect``, the supervised-data trainers). See ``docs/training.md`` (Data).

The package loads lazily: the plugin manager imports :mod:`hfsdk_datasets.plugin`
at start-up (``hfsdk --help`` and ``hfsdk plugins`` import no torch), and nothing
else is imported until a name is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Messages": "hfsdk_datasets.chat",
    "apply_template": "hfsdk_datasets.chat",
    "check_messages": "hfsdk_datasets.chat",
    "check_tools": "hfsdk_datasets.chat",
    "is_messages": "hfsdk_datasets.chat",
    "plain_rendering": "hfsdk_datasets.chat",
    "refuse_plain_tool_calls": "hfsdk_datasets.chat",
    "render_prompt": "hfsdk_datasets.chat",
    "lift_nested": "hfsdk_datasets.columns",
    "reward_column_names": "hfsdk_datasets.columns",
    "load_run_prompts": "hfsdk_datasets.loading",
    "PreparedRow": "hfsdk_datasets.prompt_dataset",
    "PromptLoader": "hfsdk_datasets.prompt_dataset",
    "load_prompt_dataset": "hfsdk_datasets.prompt_dataset",
    "RESERVED_COLUMNS": "hfsdk_datasets.prompt_dataset",
    "plain_rendering_cause": "hfsdk_datasets.prompt_dataset",
    "plain_rendering_reported": "hfsdk_datasets.prompt_dataset",
    "prepare_row": "hfsdk_datasets.prompt_dataset",
    "resolve_use_template": "hfsdk_datasets.prompt_dataset",
    "SAMPLE_ROWS": "hfsdk_datasets.unknown_tokens",
    "check_loaded_prompts": "hfsdk_datasets.unknown_tokens",
    "check_prompt_tokens": "hfsdk_datasets.unknown_tokens",
    "unknown_token_shares": "hfsdk_datasets.unknown_tokens",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hfsdk_datasets' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
