"""``check_preference_rows``: what a reward model refuses up front, DPO leaves to its steps."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

import hfsdk
from hfsdk_supervised_data import PairColumns, check_preference_rows

SHORT = {"prompt": "add one", "chosen": "two", "rejected": "three"}
LONG = {"prompt": "add one", "chosen": "two " * 8, "rejected": "four " * 8}


def _prepared(train: list[dict], val: list[dict]) -> Any:
    """A stand-in for a prepared run: its loaders' rows and a model path with no positions."""
    return SimpleNamespace(
        loader=SimpleNamespace(rows=train),
        val_loader=SimpleNamespace(rows=val),
        assets=SimpleNamespace(model_path=None),
    )


def _check(prepared: Any, tokenizer: Any, **kwargs: Any) -> None:
    check_preference_rows(
        prepared, tokenizer, use_template=False, columns=PairColumns(), max_length=6, **kwargs
    )


def test_prompt_only_validation_rows_pass_unless_validation_needs_pairs(
    make_tokenizer: Callable[..., Any],
) -> None:
    tokenizer = make_tokenizer(None)
    prepared = _prepared([SHORT], [{"prompt": "add two", "uid": "v7"}])
    _check(prepared, tokenizer)  # DPO and SFT sample validation prompts
    with pytest.raises(hfsdk.HfsdkError, match=r"^data\.val_files row v7 has no 'chosen'"):
        _check(prepared, tokenizer, validation_needs_pairs=True)


def test_pairs_all_longer_than_max_length_are_refused_only_when_asked(
    make_tokenizer: Callable[..., Any],
) -> None:
    tokenizer = make_tokenizer(None)
    _check(_prepared([SHORT, LONG], []), tokenizer, refuse_longer=True)  # steps drop the long
    prepared = _prepared([LONG, LONG], [SHORT])
    _check(prepared, tokenizer)
    with pytest.raises(hfsdk.HfsdkError) as caught:
        _check(prepared, tokenizer, refuse_longer=True)
    message = str(caught.value)
    assert message.startswith(
        "all 2 preference pairs (rows) are longer than algorithm.max_length=6"
    )
    assert "row 0" in message and "raise algorithm.max_length to at least" in message
    # Validation pairs are counted apart, and only where every validation row is scored as a
    # pair (a reward model); DPO's validation skips pairs it cannot score.
    _check(_prepared([SHORT], [LONG]), tokenizer, refuse_longer=True)
    with pytest.raises(hfsdk.HfsdkError, match=r"^all 1 preference pairs \(validation rows\)"):
        _check(
            _prepared([SHORT], [LONG]), tokenizer, refuse_longer=True, validation_needs_pairs=True
        )
