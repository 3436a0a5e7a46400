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


def test_min_score_above_max_score_is_refused() -> None:
    with pytest.raises(ValueError, match=r"max_score=1.0 is below min_score=5.0"):
        JudgeConfig(min_score=5.0, max_score=1.0)
