"""Fixtures of the prompt datasets tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<unk>", "add", "one", "two", "three", "and", "please", "now"]
    vocab = {w: i for i, w in enumerate(words)}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>")
