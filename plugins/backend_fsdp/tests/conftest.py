"""Fixtures of the fsdp backend tests: a tiny warm-started model and prompt batches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk import load_tokenizer
from hfsdk.core.batch import Batch

# A smaller build of the built-in task (a test-only dependency: pip install -e .[test]).
from hfsdk_tasks import DefaultTaskSpec, ensure_default_assets

TINY_SPEC = DefaultTaskSpec(
    hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2, warm_start_steps=60
)
"""The default task at a fraction of the size: builds in about a second, still answers sensibly."""


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny warm-started Llama model directory with its tokenizer."""
    assets = ensure_default_assets(TINY_SPEC, cache_dir=tmp_path_factory.mktemp("fsdp-cache"))
    return assets.model_dir


@pytest.fixture(scope="session")
def make_prompts(model_dir: Path) -> Callable[..., Batch]:
    """``make_prompts(texts, answers=None)``: a left-padded prompt batch with uid and columns."""
    tokenizer = load_tokenizer(model_dir)

    def make(texts: list[str], answers: list[str] | None = None) -> Batch:
        encoded = tokenizer(texts, return_tensors="pt", padding=True)
        non_tensors: dict[str, list[object]] = {
            "raw_prompt": texts,
            "uid": [f"p{i}" for i in range(len(texts))],
        }
        if answers is not None:
            non_tensors["answer"] = answers
        return Batch.from_dict(
            tensors={"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask},
            non_tensors=non_tensors,
        )

    return make


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test samples from the same random state."""
    torch.manual_seed(0)
