"""Prompt datasets: parquet, jsonl or saved ``datasets`` directories turned into a run's
prompt stream (chat templating, verl's nested columns, the unknown-token check).

The core asks for a run's prompts through ``hfsdk_load_prompts``; this package
answers. Its loader and helpers are public for plugins that read the same data
(``hfsdk data inspect``, the supervised-data trainers). See ``docs/training.md`` (Data).
"""

from __future__ import annotations

from hfsdk_datasets.chat import (
    Messages,
    check_messages,
    is_messages,
    plain_rendering,
    render_prompt,
)
from hfsdk_datasets.columns import lift_nested, reward_column_names
from hfsdk_datasets.loading import load_run_prompts
from hfsdk_datasets.prompt_dataset import (
    PreparedRow,
    PromptLoader,
    load_prompt_dataset,
    plain_rendering_reported,
    prepare_row,
    resolve_use_template,
)
from hfsdk_datasets.unknown_tokens import (
    SAMPLE_ROWS,
    check_loaded_prompts,
    check_prompt_tokens,
    unknown_token_shares,
)

__all__ = [
    "SAMPLE_ROWS",
    "Messages",
    "PreparedRow",
    "PromptLoader",
    "check_loaded_prompts",
    "check_messages",
    "check_prompt_tokens",
    "is_messages",
    "lift_nested",
    "load_prompt_dataset",
    "load_run_prompts",
    "plain_rendering",
    "plain_rendering_reported",
    "prepare_row",
    "render_prompt",
    "resolve_use_template",
    "reward_column_names",
    "unknown_token_shares",
]
