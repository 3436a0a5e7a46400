"""``llm_judge``'s default scale agrees with its default template; min/max are checked."""

from __future__ import annotations

import re
from typing import Any

import pytest

import hfsdk_backend_common.judge as judge
from hfsdk_backend_common.judge import JudgeConfig, llm_judge


class _Tokenizer:
    pad_token_id = 0

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [1, 2]}


class _Source:
    tokenizer = _Tokenizer()


class _Rollout:
    """Writes fixed verdicts (no model needed)."""

    def __init__(self, verdicts: list[str]) -> None:
        self.verdicts = verdicts

    def generate_sequences(self, batch: Any) -> dict[str, list[str]]:
        return {"response_text": self.verdicts}


def test_default_scale_matches_the_default_template(monkeypatch: pytest.MonkeyPatch) -> None:
    config = JudgeConfig()
    low, high = re.search(r"\((\d+)-(\d+)\)", config.template).groups()
    assert (config.min_score, config.max_score) == (float(low), float(high))
    monkeypatch.setattr(judge, "_judge", lambda _config: (_Source(), _Rollout([" 1", " 4", " 9"])))
    rows = llm_judge(["a", "b", "c"], ["x", "y", "z"], config=config)
    assert [r["score"] for r in rows] == [1.0, 4.0, 9.0]


def test_the_first_match_that_is_a_number_is_the_score(monkeypatch: pytest.MonkeyPatch) -> None:
    """A match that is not a number ("...", "nan") is passed over like text that does not
    match; a verdict with no number among its matches scores no_score, unparsed."""
    verdicts = ["... I'd say 7", "...", "nan then 3"]
    monkeypatch.setattr(judge, "_judge", lambda _config: (_Source(), _Rollout(verdicts)))
    config = JudgeConfig(score_pattern=r"([\w.]+)", no_score=-1.0)
    rows = llm_judge(["a", "b", "c"], ["x", "y", "z"], config=config)
    assert rows == [
        {"score": 7.0, "parsed": 1.0},
        {"score": -1.0, "parsed": 0.0},
        {"score": 3.0, "parsed": 1.0},
    ]


def test_min_score_above_max_score_is_refused() -> None:
    with pytest.raises(ValueError, match=r"max_score=1.0 is below min_score=5.0"):
        JudgeConfig(min_score=5.0, max_score=1.0)
