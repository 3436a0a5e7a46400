"""Hook implementations of the prompt datasets plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import PromptRequest, RunPrompts


@hfsdk.hookimpl
def hfsdk_load_prompts(request: PromptRequest) -> RunPrompts:
    """Load a run's prompts from parquet, jsonl or saved ``datasets`` directories."""
    from hfsdk_datasets.loading import load_run_prompts

    return load_run_prompts(request)
