"""Reward signatures checked against the call style and the dataset's columns before a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk_rewards import load_reward_functions
from hfsdk_rewards.signatures import signature_problem

FUNCTIONS = """
def per_sample(prompt, response, answer):
    return [0.0]

def no_positional(**kwargs):
    return [0.0]

def needs_x(prompts, responses, x):
    return [0.0] * len(prompts)

def good(prompts, responses, answer, scale=1.0):
    return [scale * (r.strip() == a) for r, a in zip(responses, answer)]

def starred(*args, **columns):
    return [0.0] * len(args[0])
"""
COLUMNS = ["prompt", "answer", "uid", "prompt_messages", "rendered_prompt"]


@pytest.fixture
def rewards_file(tmp_path: Path) -> str:
    path = tmp_path / "rw.py"
    path.write_text(FUNCTIONS)
    return str(path)


def _problem(rewards_file: str, name: str, **kwargs: object) -> str | None:
    (loaded,) = load_reward_functions([{"name": f"{rewards_file}:{name}", "kwargs": kwargs}])
    return signature_problem(loaded.call, COLUMNS)


def test_a_column_that_collides_with_a_positional_parameter(rewards_file: str) -> None:
    problem = _problem(rewards_file, "per_sample")
    assert problem is not None
    assert "its parameter 'prompt' receives the prompts" in problem
    assert "the dataset's column 'prompt' is passed by keyword too" in problem
    assert "fn(prompts, responses, **columns)" in problem and "verl style" in problem


def test_too_few_positional_parameters(rewards_file: str) -> None:
    problem = _problem(rewards_file, "no_positional")
    assert problem is not None and "takes 0 positional parameter(s)" in problem
    assert "fn(prompts, responses, **columns)" in problem


def test_a_required_parameter_nothing_fills(rewards_file: str) -> None:
    problem = _problem(rewards_file, "needs_x")
    assert problem is not None and "needs 'x', which is neither a dataset column" in problem
    assert _problem(rewards_file, "needs_x", x=3) is None  # a setting fills it


def test_callable_functions_pass(rewards_file: str) -> None:
    assert _problem(rewards_file, "good") is None
    assert _problem(rewards_file, "good", scale=2.0) is None
    assert _problem(rewards_file, "starred") is None
    # A setting named like a column is reported too (before the first batch).
    problem = _problem(rewards_file, "good", answer="5")
    assert problem is not None and "same name as dataset columns" in problem


def test_a_registered_function_is_checked_for_the_columns_it_declares() -> None:
    # exact_match registers columns=(answer_column,): a dataset without it is refused
    # before a run starts, not at step 1 (issue 34).
    (loaded,) = load_reward_functions([{"name": "exact_match"}])
    assert loaded.call.needs == ("answer",)
    problem = signature_problem(loaded.call, ["question", "solution", "uid", "prompt_messages"])
    assert problem == (
        "reward function 'exact_match' reads the dataset column 'answer', which the dataset "
        "lacks (columns: question, solution, uid); set kwargs: {answer_column: COLUMN} to the "
        "column that holds it, or add the column to the dataset"
    )
    (loaded,) = load_reward_functions(
        [{"name": "exact_match", "kwargs": {"answer_column": "solution"}}]
    )
    assert loaded.call.needs == ("solution",)
    assert signature_problem(loaded.call, ["question", "solution", "uid"]) is None


def test_a_missing_column_named_by_a_setting_names_the_setting_and_verls_column() -> None:
    # The line said "name the column ... in the function's kwargs" without the kwarg's name;
    # verl's datasets hold the reference in ground_truth.
    (loaded,) = load_reward_functions([{"name": "exact_match"}])
    problem = signature_problem(loaded.call, ["prompt", "ground_truth", "data_source"])
    assert problem is not None and "\n" not in problem
    assert problem.endswith(
        "lacks (columns: data_source, ground_truth, prompt); set kwargs: {answer_column: "
        "ground_truth} if that column holds it (verl's layout), or add the column to the dataset"
    )


def test_a_setting_the_function_does_not_take_is_refused_with_a_suggestion(
    rewards_file: str,
) -> None:
    # It passed the checks, then step 1 failed with a raw TypeError blamed on sample 0's data.
    problem = _problem(rewards_file, "good", scal=2.0)
    assert problem == (
        "reward function '" + rewards_file + ":good' is given the setting 'scal' in its kwargs, "
        "which it does not take (parameters after prompts and responses: answer, scale); did "
        "you mean 'scale'? fix the name in kwargs, or give the function that parameter (or "
        "**kwargs)"
    )
    assert "did you mean" not in _problem(rewards_file, "good", zzz=1)
    # A function with **kwargs takes any setting.
    assert _problem(rewards_file, "starred", scal=2.0) is None
