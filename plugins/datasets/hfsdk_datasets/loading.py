"""A run's prompts from its files: what the plugin answers ``hfsdk_load_prompts`` with."""

from __future__ import annotations

import attrs

from hfsdk import PromptRequest, RunPrompts
from hfsdk_datasets.prompt_dataset import PromptLoader, load_prompt_dataset
from hfsdk_datasets.unknown_tokens import check_loaded_prompts


def load_run_prompts(request: PromptRequest) -> RunPrompts:
    """Load and tokenise the training prompts (and the validation ones when there are files),
    refusing prompts the tokenizer cannot read (``data.max_unknown_token_share``)."""
    config = request.config
    data, seed = config.data, config.trainer.seed
    dataset = load_prompt_dataset(request.train_files, data.prompt_key)
    train = PromptLoader(dataset, request.tokenizer, data, seed=seed, tools=request.tools)
    check_loaded_prompts(
        request.tokenizer,
        train.token_ids,
        train.rows,
        data.max_unknown_token_share,
        data.prompt_key,
        request.tokenizer_path,
        builtin=request.builtin_tokenizer,
    )
    validation = None
    if request.val_files:
        val = load_prompt_dataset(request.val_files, data.prompt_key)
        val_data = attrs.evolve(data, shuffle=False, batch_size=len(val))
        validation = PromptLoader(val, request.tokenizer, val_data, seed=seed, tools=request.tools)
    return RunPrompts(train=train, validation=validation, row_columns=tuple(train.rows[0]))
