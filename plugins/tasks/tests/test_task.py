"""The default task's prompts, reward and cost."""

from __future__ import annotations

import numpy as np
import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk_tasks import DefaultTaskSpec, default_task_cost, default_task_reward
from hfsdk_tasks.task import (
    first_number,
    format_prompt,
    parse_prompt,
    task_rows,
    validation_rows,
)


def test_rows_cover_the_addition_table_once() -> None:
    rows = task_rows(DefaultTaskSpec())
    assert len(rows) == 100
    assert len({r["prompt"] for r in rows}) == 100
    for row in rows:
        a, b = parse_prompt(row["prompt"])
        assert int(row["answer"]) == a + b
    # Shuffled deterministically by the seed.
    assert rows == task_rows(DefaultTaskSpec())
    assert rows != task_rows(DefaultTaskSpec(seed=1))
    table_order = [format_prompt(a, b) for a in range(10) for b in range(10)]
    assert [r["prompt"] for r in rows] != table_order


def test_validation_rows_are_a_fixed_subset() -> None:
    spec = DefaultTaskSpec(val_size=10)
    val = validation_rows(spec)
    assert len(val) == 10
    assert {r["prompt"] for r in val} <= {r["prompt"] for r in task_rows(spec)}
    assert val == validation_rows(spec)


def test_reward_uses_the_first_number_of_the_response() -> None:
    prompts = [format_prompt(3, 5)] * 6
    responses = ["8", "ugh 8", "9", "ugh", "", "8 9"]
    assert default_task_reward(prompts, responses, answer=["8"] * 6) == [1, 1, 0, 0, 0, 1]
    # Without the column the answer comes from the prompt.
    assert default_task_reward(prompts, responses) == [1, 1, 0, 0, 0, 1]
    # Answers may be numbers, in a numpy object array as the batch stores columns.
    answers = np.array([8, 8, 8, 9, 9, 9], dtype=object)
    assert default_task_reward(prompts, responses, answer=answers) == [1, 1, 0, 0, 0, 0]


def test_whole_float_answers_count_as_integers_and_fractions_are_refused() -> None:
    # pandas stores an integer column with a missing value as floats (8 -> 8.0).
    prompts = [format_prompt(3, 5)] * 4
    responses = ["8", "8.0", "9", "ugh 8"]
    answers = np.array([8.0, 8.0, 9.0, 8.0])
    assert default_task_reward(prompts, responses, answer=answers) == [1, 1, 1, 1]
    assert default_task_reward(prompts, responses, answer=["8.0", " 8 ", "9.00", "+8"]) == [
        1, 1, 1, 1,
    ]  # fmt: skip
    for bad in (8.5, "8.5", float("nan")):
        with pytest.raises(HfsdkError, match=r"must hold integers.*entry 1 is .*not a whole"):
            default_task_reward(prompts[:2], responses[:2], answer=[8, bad])


def test_reward_ignores_other_columns_and_checks_lengths() -> None:
    assert default_task_reward(["1 + 1 ="], ["2"], answer=["2"], uid=["x"]) == [1.0]
    with pytest.raises(HfsdkError, match="one response per prompt"):
        default_task_reward(["1 + 1 ="], ["2", "3"])
    with pytest.raises(HfsdkError, match="'answer' column has 2 entries"):
        default_task_reward(["1 + 1 ="], ["2"], answer=["2", "2"])
    with pytest.raises(HfsdkError, match="must hold integers"):
        default_task_reward(["1 + 1 ="], ["2"], answer=["two"])
    with pytest.raises(HfsdkError, match="not a default-task prompt"):
        default_task_reward(["what is two?"], ["2"])


def test_cost_flags_the_filler_word_only_as_a_word() -> None:
    prompts = ["1 + 1 ="] * 4
    assert default_task_cost(prompts, ["ugh 2", "2", "ughh 2", "2 ugh"]) == [1, 0, 0, 1]
    assert default_task_cost(prompts[:1], ["hmm 2"], filler_word="hmm") == [1.0]


def test_first_number() -> None:
    assert first_number("ugh 12 3") == 12
    assert first_number("none") is None


def test_a_decimal_or_non_ascii_number_is_not_the_sum() -> None:
    """Before: ``-?\\d+`` read "8.5" as 8 and the Arabic-Indic "٨" as 8 (reward 1.0)."""
    responses = ["8.5", "\u0668", "8", "8.0", "8.", "-8.5 8"]
    assert default_task_reward(["3 + 5 ="] * 6, responses) == [0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
