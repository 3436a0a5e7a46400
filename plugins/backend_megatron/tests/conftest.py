"""Fixtures of the megatron backend tests: tiny Llama / Qwen2 directories built locally."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

# A smaller build of the built-in task (a test-only dependency: pip install -e .[test]).
from hfsdk_tasks import DefaultTaskSpec, ensure_default_assets

TINY_SPEC = DefaultTaskSpec(
    hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2, warm_start_steps=60
)
"""The default task's tokenizer and a tiny warm-started model whose heads tp=2 divides."""


@pytest.fixture(scope="session")
def tiny_assets(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The default task's assets at :data:`TINY_SPEC` (tokenizer, model, data)."""
    return ensure_default_assets(TINY_SPEC, cache_dir=tmp_path_factory.mktemp("megatron-cache"))


def _save_tiny_llama(
    directory: Path,
    tokenizer_dir: Path,
    *,
    tied: bool = False,
    head: str = "lm",
    family: str = "llama",
    seed: int = 0,
) -> Path:
    """A random tiny model (4 query heads, 2 key/value heads, odd vocabulary) saved locally."""
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        LlamaConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
    )

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir))
    common = dict(
        vocab_size=len(tokenizer) + 1,  # odd: padded to a multiple of tp
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    config = LlamaConfig(**common) if family == "llama" else Qwen2Config(**common)
    torch.manual_seed(seed)
    if head == "lm":
        model = AutoModelForCausalLM.from_config(config)
    else:
        config.num_labels = 1
        auto = (
            AutoModelForTokenClassification
            if head == "value"
            else AutoModelForSequenceClassification
        )
        model = auto.from_config(config)
    with torch.no_grad():  # larger weights than HF's init: logits far from uniform
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 0.2)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="session")
def save_tiny_llama() -> Callable[..., Path]:
    """``save_tiny_llama(directory, tokenizer_dir, tied=, head=, family=, seed=)``."""
    return _save_tiny_llama


@pytest.fixture(scope="session")
def tp2_tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A tiny Llama whose 4 heads / 2 key-value heads tp = 2 divides (peaked logits) and the
    default task's tokenizer: ``(model path, tokenizer)``, built once per session."""
    from hfsdk import default_task_assets, load_tokenizer
    from hfsdk_testing import save_tiny_llama

    root = tmp_path_factory.mktemp("tp2_llama")
    # The default task's tokenizer (its words; the model below is this fixture's own).
    tokenizer = load_tokenizer(default_task_assets().tokenizer_dir)
    path = save_tiny_llama(
        root / "model", tokenizer, hidden_size=64, intermediate_size=64, num_heads=4,
        num_kv_heads=2, init_std=0.2,
    )  # fmt: skip
    return path, tokenizer


@pytest.fixture
def fresh_plugin_manager() -> Iterator[None]:
    """A plugin manager built from the installed plugins, before and after the test."""
    from hfsdk.core.plugin_manager import reset_plugin_manager

    reset_plugin_manager()
    yield
    reset_plugin_manager()


@pytest.fixture
def own_megatron_state() -> Iterator[None]:
    """Destroy the megatron groups and the one-rank process group a bare engine makes here.

    Both are process-wide and outlive the engine; left behind, every later in-process
    run of the session refuses to start (torch.distributed already initialised).
    """
    import torch.distributed as dist
    from megatron.core import parallel_state

    had_group = dist.is_initialized()
    try:
        yield
    finally:
        if parallel_state.model_parallel_is_initialized():
            parallel_state.destroy_model_parallel()
        if not had_group and dist.is_initialized():
            dist.destroy_process_group()
