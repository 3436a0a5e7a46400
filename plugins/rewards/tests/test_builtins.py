"""Built-in reward functions: exact_match, format_check, length_penalty."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk_rewards.builtins import (
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


def test_exact_match_reads_a_leading_dot_number_whole() -> None:
    # The default pattern took ".5" as 5: "0.5" scored 0 and "5" scored 1.
    responses = ["The probability is .5", "so -.25 it is", "It is .5", "version 1.2.3", "5."]
    out = exact_match([""] * 5, responses, answer=["0.5", "-0.25", "5", "3", "5"])
    assert scores(out) == [1.0, 1.0, 0.0, 1.0, 1.0]
    # An ellipsis is no decimal point: "...10" is 10, not .10.
    out = exact_match([""] * 3, ["So it is...10", "Answer: ...7", "..5"], answer=["10", "7", "5"])
    assert scores(out) == [1.0, 1.0, 1.0]


def test_exact_match_drops_a_latex_escaped_dollar_as_a_plain_one() -> None:
    # "\$18.90" was no number ("\18.90" once the "$" went), so it equalled neither 18.90
    # nor "$18.90".
    boxed = ExactMatchConfig(extract="boxed")
    out = exact_match(["", ""], [r"\boxed{\$18.90}", r"\boxed{18.90}"], config=boxed,
                      answer=["18.90", r"\$18.9"])  # fmt: skip
    assert scores(out) == [1.0, 1.0]
    assert scores(exact_match([""], ["costs $18.90"], answer=[r"\$18.90"])) == [1.0]


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
    assert registry.get("length_penalty").plugin == "rewards"


# MATH-style answers: the cases of issue 42 (reference, response).
MATH_CASES = [
    (r"\frac{1}{2}", r"so the answer is $\boxed{\frac{1}{2}}$"),
    (r"\sqrt{2}", r"hence \boxed{\sqrt{2}}"),
    (r"\{1,2\}", r"the set is \boxed{\{1,2\}}"),
    (r"\frac12", r"It is \boxed{0.5}"),
    ("42", r"\boxed{42}"),
    ("0.5", r"\boxed{1/2}"),
    ("x^2+1", r"we get \boxed{1 + x^2}"),
]


def test_exact_match_boxed_extraction_balances_nested_braces() -> None:
    from hfsdk_rewards.builtins import extract_boxed

    assert extract_boxed(r"\boxed{\frac{1}{2}} then \boxed{\{1,2\}}") == r"\{1,2\}"
    assert extract_boxed(r"\boxed{\frac{1}{2}} then \boxed{3}", "first") == r"\frac{1}{2}"
    assert extract_boxed(r"\boxed{\sqrt{2}") is None  # unclosed
    config = ExactMatchConfig(extract="boxed", numeric=True)
    refs, responses = zip(*MATH_CASES[:3], ("5", r"\boxed{5.0}"), strict=True)
    out = exact_match([""] * 4, list(responses), config=config, answer=list(refs))
    assert scores(out) == [1.0, 1.0, 1.0, 1.0]
    # The regex formerly documented for boxed answers stops at the first closing brace.
    old = ExactMatchConfig(answer_pattern=r"\\boxed\{([^}]*)\}")
    assert scores(exact_match([""] * 3, list(responses[:3]), config=old, answer=list(refs[:3]))) == [
        0.0, 0.0, 0.0,
    ]  # fmt: skip


def test_math_verify_scores_the_math_cases_exact_match_cannot() -> None:
    from hfsdk_rewards.math_verify_reward import MathVerifyConfig, math_verify

    refs, responses = zip(*MATH_CASES, strict=True)
    out = math_verify([""] * 7, list(responses), answer=list(refs))
    assert scores(out) == [1.0] * 7
    # exact_match with boxed extraction: the string-equal ones only.
    boxed = exact_match([""] * 7, list(responses), config=ExactMatchConfig(extract="boxed"),
                        answer=list(refs))  # fmt: skip
    assert scores(boxed) == [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    config = MathVerifyConfig(correct_score=2.0, incorrect_score=-1.0, no_answer_score=-2.0)
    out = math_verify(["", "", ""], [r"\boxed{3}", "no answer here", r"\boxed{4}"],
                      config=config, answer=["4", "4", "4"])  # fmt: skip
    assert scores(out) == [-1.0, -2.0, 2.0]
    assert [r["answer_found"] for r in out] == [1.0, 0.0, 1.0]
    with pytest.raises(HfsdkError, match="math_verify needs the dataset column 'answer'"):
        math_verify([""], ["1"], solution=["1"])


def test_math_verify_runs_under_hfsdks_deadline_outside_the_main_thread() -> None:
    # math-verify's own timeout is SIGALRM, which only the main thread may set: on another
    # thread it fails (and math-verify scores 0). Off, hfsdk's reward deadline bounds it.
    import threading

    from hfsdk_rewards.calling import RewardCall, call_reward_functions

    registry = hfsdk.get_registry("reward_functions")
    entry = registry.get("math_verify")
    refs, responses = zip(*MATH_CASES, strict=True)
    found: list = []
    call = RewardCall(label="math_verify", fn=entry.impl)  # type: ignore[arg-type]
    columns = {"answer": list(refs)}

    def score() -> None:
        found.extend(
            call_reward_functions([call], [""] * 7, list(responses), columns, timeout_s=60)
        )

    worker = threading.Thread(target=score)
    worker.start()
    worker.join(120)
    assert found and found[0].scores == [1.0] * 7
    assert entry.config_cls.__name__ == "MathVerifyConfig" and entry.plugin == "rewards"


def test_hfsdk_list_rewards_shows_math_verify(capsys: pytest.CaptureFixture[str]) -> None:
    from hfsdk.core.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["list", "rewards"])
    out = capsys.readouterr().out
    assert info.value.code in (0, None)
    line = next(x for x in out.splitlines() if x.startswith("math_verify"))
    assert "equals the reference mathematically" in line and line.endswith("[rewards]")


def test_exact_match_compares_numbers_exactly_not_as_floats() -> None:
    # Both round to the same double; they are different answers.
    responses = ["12345678901234567", "3.0", "1,000", "0.1", "2.50"]
    refs = ["12345678901234568", "3", "1000", "0.10000000000000001", "2.5"]
    out = exact_match([""] * 5, responses, answer=refs)
    assert scores(out) == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert scores(exact_match([""], ["12345678901234567"], answer=["12345678901234567"])) == [1.0]


def test_exact_match_drops_commas_only_as_thousands_separators() -> None:
    responses = ["1,2,3", "12,5", "1,000", "so 42, done", "-1,234.5", "1,2,3"]
    refs = ["123", "125", "1000", "42", "-1234.50", "1,2,3"]
    out = exact_match([""] * 6, responses, answer=refs)
    assert scores(out) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]


def test_exact_match_reads_no_reference_as_missing_and_a_list_as_alternatives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A null reference was compared as the text "None"; a list as its repr.
    responses = ["The answer is 4", "The answer is 4", "The answer is None", "The answer is 5"]
    answers = [["4", "four"], None, None, [3, None, 5]]
    with caplog.at_level(logging.WARNING, logger="hfsdk_rewards.builtins"):
        out = exact_match([""] * 4, responses, config=ExactMatchConfig(answer_pattern=r"is (\S+)"),
                          answer=answers)  # fmt: skip
    assert scores(out) == [1.0, 0.0, 0.0, 1.0]
    assert [r["reference_missing"] for r in out] == [0.0, 1.0, 1.0, 0.0]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "2 of 4 samples have no reference answer in column 'answer'" in warning
    assert "(first: sample 1)" in warning


def test_exact_match_refuses_a_reference_that_is_no_text_number_or_list() -> None:
    with pytest.raises(HfsdkError, match=r"sample 0's reference in column 'answer' is a dict"):
        exact_match([""], ["4"], answer=[{"value": 4}])


def test_exact_match_takes_numpy_references() -> None:
    # A NumPy integer is no subclass of int: it was refused as "no text or number".
    answers = [np.int64(4), [np.int32(3), np.float32("nan")], np.float32("nan")]
    out = exact_match([""] * 3, ["4", "3", "4"], answer=answers)
    assert scores(out) == [1.0, 1.0, 0.0]
    assert [r["reference_missing"] for r in out] == [0.0, 0.0, 1.0]


# The documented default pattern, compiled as format_check compiled it before it became linear.
_OLD_FORMAT = r"<think>.*?</think>\s*<answer>.*?</answer>"

FORMAT_CASES = [
    "<think>a</think><answer>b</answer>",
    "<think>a</think>\n \t<answer>b</answer>",
    "  <think>\nx\n</think>\n<answer>\n42\n</answer>\n",
    "<think></think><answer></answer>",
    "<think>a</think><answer>b</answer> trailing",
    "lead <think>a</think><answer>b</answer>",
    "<think>a</think> x <answer>b</answer>",
    "<think>a</think><answer>b",
    "<think>a<answer>b</answer>",
    "<think>a</think><answer>b</answer><answer>c</answer>",
    "<think>a</think><answer>b</answer></think><answer>c</answer>",
    "<think><think>a</think></think><answer>b</answer>",
    "<think>a</think><answer></answer></answer>",
    "<answer>b</answer><think>a</think>",
    "<think>a</think><answer>b</answer>\u2003",
    "<think>a</think>\u2003<answer>b</answer>",
    "<think></think><answer>",
    "</think><answer></answer>",
    "<think></think><answer></answer><think></think><answer>",
    "",
    "no tags at all",
]


@pytest.mark.parametrize("full_match", [True, False])
def test_format_check_gives_the_documented_patterns_answers(full_match: bool) -> None:
    import re

    regex = re.compile(_OLD_FORMAT, re.DOTALL)
    check = regex.fullmatch if full_match else regex.search
    expected = [1.0 if check(r.strip()) else 0.0 for r in FORMAT_CASES]
    config = FormatCheckConfig(full_match=full_match)
    assert format_check([""] * len(FORMAT_CASES), FORMAT_CASES, config=config) == expected


@pytest.mark.parametrize("full_match", [True, False])
def test_format_check_is_linear_on_degenerate_output(full_match: bool) -> None:
    import time

    # The regex's lazy .*? tried every tag pair: 18,400 such chars took 55 s.
    responses = ["<think>" + "</think><answer>" * 4000, "<think></think><answer>" * 3000]
    start = time.monotonic()
    out = format_check(["", ""], responses, config=FormatCheckConfig(full_match=full_match))
    assert out == [0.0, 0.0]
    assert time.monotonic() - start < 1.0  # linear: milliseconds


def test_extract_boxed_is_linear_on_unclosed_boxes() -> None:
    import time

    from hfsdk_rewards.builtins import extract_boxed

    start = time.monotonic()
    # Each unclosed \boxed{ scanned to the end of the text: 56k such chars took 101 s.
    assert extract_boxed("\\boxed{" * 8000) is None
    assert extract_boxed("\\boxed{" * 8000 + "}") == ""
    assert time.monotonic() - start < 1.0


def test_extract_boxed_keeps_its_answers() -> None:
    from hfsdk_rewards.builtins import extract_boxed

    assert extract_boxed(r"\boxed{\frac{1}{2}} then \fbox {3}") == "3"
    assert extract_boxed(r"\boxed{\frac{1}{2}} then \fbox {3}", "first") == r"\frac{1}{2}"
    assert extract_boxed(r"\boxed{a\}b} \boxed{c") == r"a\}b"
    assert extract_boxed(r"} \boxed{x{y}z}}") == "x{y}z"
    assert extract_boxed(r"\boxed{\boxed{1}}", "first") == r"\boxed{1}"
    assert extract_boxed(r"\boxed{\boxed{1}}") == "1"
    assert extract_boxed("\\boxed{a\\") is None
    assert extract_boxed("\\\\boxed{7}") == "7"
