"""Built-in reward functions: exact_match, format_check, length_penalty."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk.core.rewards.builtins import (
    ExactMatchConfig,
    FormatCheckConfig,
    LengthPenaltyConfig,
    exact_match,
    format_check,
    length_penalty,
)


def scores(results: list[dict[str, float]]) -> list[float]:
    return [r["score"] for r in results]


def test_exact_match_takes_the_last_number_by_default() -> None:
    responses = ["2 + 3 = 5, so 5", "first 5 then 6", "1,000 apples", "3.0", "no idea"]
    out = exact_match([""] * 5, responses, answer=["5", "5", "1000", 3, "7"])
    assert scores(out) == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert [r["answer_found"] for r in out] == [1.0, 1.0, 1.0, 1.0, 0.0]


def test_exact_match_settings() -> None:
    config = ExactMatchConfig(
        answer_pattern=r"<answer>(.*?)</answer>",
        answer_column="solution",
        reference_pattern=r"####\s*(\S+)",
        match="first",
        numeric=False,
        correct_score=2.0,
        incorrect_score=-1.0,
        no_answer_score=-2.0,
    )
    out = exact_match(
        ["", "", ""],
        ["<answer>Paris</answer><answer>x</answer>", "<answer>Rome</answer>", "Paris"],
        config=config,
        solution=["... #### paris", "#### Paris", "#### Paris"],
    )
    assert scores(out) == [2.0, -1.0, -2.0]
    sensitive = ExactMatchConfig(answer_pattern=r"\w+", case_sensitive=True, numeric=False)
    assert scores(exact_match([""], ["Paris"], config=sensitive, answer=["paris"])) == [0.0]


def test_exact_match_missing_column_is_a_clear_error() -> None:
    with pytest.raises(HfsdkError, match=r"needs the dataset column 'answer'.*\['label'\]"):
        exact_match([""], ["1"], label=["1"])
    # ... and says where answer_column is set.
    with pytest.raises(HfsdkError, match=r"kwargs: \{answer_column: COLUMN\}"):
        exact_match([""], ["1"], label=["1"])


def test_format_check() -> None:
    good = "<think>a\nb</think>\n<answer>4</answer>"
    responses = [good, "<answer>4</answer>", f"{good} trailing"]
    assert format_check([""] * 3, responses) == [1.0, 0.0, 0.0]
    partial = FormatCheckConfig(full_match=False, match_score=0.5, mismatch_score=-0.5)
    assert format_check([""] * 3, responses, config=partial) == [0.5, -0.5, 0.5]


def test_length_penalty_by_hand() -> None:
    config = LengthPenaltyConfig(max_length=10, buffer_length=4, penalty=2.0)
    responses = ["x" * 6, "x" * 7, "x" * 10, "x" * 11]
    # 0 up to 6; (7 − 6)/4 · 2; (10 − 6)/4 · 2; beyond 10: 2
    assert length_penalty([""] * 4, responses, config=config) == [0.0, -0.5, -2.0, -2.0]
    words = LengthPenaltyConfig(max_length=4, buffer_length=2, unit="words")
    assert length_penalty([""], ["a b c d"], config=words) == [-1.0]
    hard = LengthPenaltyConfig(max_length=3, buffer_length=0)
    assert length_penalty([""] * 2, ["abc", "abcd"], config=hard) == [0.0, -1.0]


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="not a valid regular expression"):
        ExactMatchConfig(answer_pattern="(")
    with pytest.raises(ValueError, match="exceeds max_length"):
        LengthPenaltyConfig(max_length=4, buffer_length=5)
    with pytest.raises(ValueError, match="match"):
        ExactMatchConfig(match="middle")


def test_builtins_are_registered_with_their_configs() -> None:
    registry = hfsdk.get_registry("reward_functions")
    assert registry.get("exact_match").config_cls is ExactMatchConfig
    assert registry.get("format_check").impl is format_check
    assert registry.get("length_penalty").plugin == "hfsdk"
