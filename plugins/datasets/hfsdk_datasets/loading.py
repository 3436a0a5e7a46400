"""A run's prompts from its files: what the plugin answers ``hfsdk_load_prompts`` with."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from hfsdk import PromptRequest, RunPrompts
from hfsdk_datasets.dataset_parts import data_description
from hfsdk_datasets.prompt_dataset import PromptLoader, load_prompt_dataset
from hfsdk_datasets.unknown_tokens import check_loaded_prompts


def load_run_prompts(request: PromptRequest) -> RunPrompts:
    """Load and tokenise the training prompts (and the validation ones when there are files),
    refusing prompts the tokenizer cannot read (``data.max_unknown_token_share``) in either."""
    train = _loaded(request, request.train_files, validation=False)
    validation = _loaded(request, request.val_files, validation=True) if request.val_files else None
    return RunPrompts(train=train, validation=validation, row_columns=tuple(train.rows[0]))


def _loaded(request: PromptRequest, files: Sequence[str], *, validation: bool) -> PromptLoader:
    """The training or validation files as a checked :class:`PromptLoader`.

    Validation scores every prompt in one batch, in file order.
    """
    config = request.config
    data, seed = config.data, config.trainer.seed
    dataset = load_prompt_dataset(files, data.prompt_key, validation=validation)
    if validation:
        data = attrs.evolve(data, shuffle=False, batch_size=len(dataset))
    loader = PromptLoader(
        dataset,
        request.tokenizer,
        data,
        seed=seed,
        tools=request.tools,
        validation=validation,
        files=files,
    )
    check_loaded_prompts(
        request.tokenizer,
        loader.token_ids,
        loader.rows,
        data.max_unknown_token_share,
        data.prompt_key,
        request.tokenizer_path,
        builtin=request.builtin_tokenizer,
        # The training message stays as it was; validation's says whose prompts they are.
        data=data_description(True, files) if validation else "",
    )
    return loader
