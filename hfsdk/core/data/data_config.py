"""Configuration of the prompt dataset."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class DataConfig:
    """Where prompts come from and how they are batched.

    ``train_files`` may be parquet or jsonl files or a saved ``datasets``
    directory; empty means the built-in default task.
    """

    train_files: tuple[str, ...] = ()
    val_files: tuple[str, ...] = ()
    prompt_key: str = "prompt"
    batch_size: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    """Prompts per step (each is sampled ``n_samples_per_prompt`` times)."""
    max_prompt_length: int = attrs.field(default=64, validator=attrs.validators.ge(1))
    """Prompts longer than this many tokens are dropped (with a count in the log)."""
    shuffle: bool = True
    apply_chat_template: bool | None = None
    """``None``: use the tokenizer's chat template when it has one."""
