"""One tiny Qwen2-VL per test session, built from the shapes task's words (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hfsdk_vision.model import TinyVLMSpec, save_tiny_vlm
    from hfsdk_vision.shapes import tokenizer_corpus

    return save_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"), tokenizer_corpus(), TinyVLMSpec())


@pytest.fixture(scope="session")
def vlm(vlm_dir: Path):
    """``(model, processor)`` loaded from :func:`vlm_dir` (shared: do not train it in place)."""
    from hfsdk_vision.model import load_tiny_vlm

    return load_tiny_vlm(vlm_dir)
