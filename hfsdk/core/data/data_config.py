"""Configuration of the prompt dataset."""

from __future__ import annotations

import attrs

from hfsdk.core.config.help import help_field
from hfsdk.core.config.paths import absolute_if_exists


@attrs.frozen(kw_only=True)
class DataConfig:
    """Where prompts come from and how they are batched.

    ``train_files`` may be parquet or jsonl files or a saved ``datasets``
    directory; empty means the built-in default task.
    """

    train_files: tuple[str, ...] = help_field(
        "Training prompts: parquet/jsonl files or a datasets directory; empty runs the built-"
        "in default task.",
        default=(),
        converter=absolute_if_exists,
    )
    val_files: tuple[str, ...] = help_field(
        "Validation prompts (same formats); empty: none (the default task brings its own).",
        default=(),
        converter=absolute_if_exists,
    )
    prompt_key: str = help_field(
        "Column holding the prompt text (or chat messages).", default="prompt"
    )
    batch_size: int = help_field(
        "Prompts per training step (before n_samples_per_prompt repeats them).",
        default=8,
        validator=attrs.validators.ge(1),
    )
    max_prompt_length: int = help_field(
        "Prompts longer than this many tokens are dropped with a warning; the one key for the "
        "prompt length (rollout.max_prompt_length follows from it).",
        default=64,
        validator=attrs.validators.ge(1),
    )
    max_unknown_token_share: float = help_field(
        "A run stops before it starts when more than this share of the prompt tokens are the "
        "tokenizer's unknown token (text the tokenizer cannot read); 1 turns the check off.",
        default=0.05,
        validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)],
    )
    shuffle: bool = help_field(
        "Shuffle the prompts each epoch (seeded by trainer.seed).", default=True
    )
    apply_chat_template: bool | None = help_field(
        "Format prompts (plain strings too) with the tokenizer's chat template; null: when the"
        " tokenizer has one; false: strings as written, messages in the plain rendering.",
        default=None,
    )
