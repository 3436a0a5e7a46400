"""Fixtures of the supervised-data tests: a word-level tokenizer with a chat template."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# Every role tag, every word and the end-of-turn marker is one token (word-level, whitespace).
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
WORDS = ["<pad>", "<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>", "<|tool|>"]
WORDS += ["<|end|>", "add", "one", "two", "three", "four", "be", "brief", "again", "ok"]
WORDS += ["user:", "assistant:", "tool:", "call"]


def _make_tokenizer(template: str | None = TEMPLATE):  # type: ignore[no-untyped-def]
    """A word-level tokenizer: one id per whitespace-separated word (test helper)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>", eos_token="</s>"
    )
    tokenizer.chat_template = template
    return tokenizer


@pytest.fixture
def make_tokenizer() -> Callable[..., Any]:
    """``make_tokenizer(template=TEMPLATE)``: a word-level tokenizer (``None``: no template)."""
    return _make_tokenizer
