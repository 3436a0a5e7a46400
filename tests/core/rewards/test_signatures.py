"""Reward signatures checked against the call style and the dataset's columns before a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.rewards import load_reward_functions
from hfsdk.core.rewards.signatures import signature_problem

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

def compute_score(solution_str, ground_truth, method):
    return 0.0

def verl_ok(data_source, solution_str, ground_truth, extra_info=None, method="strict"):
    return 0.0
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


def test_a_verl_function_missing_a_field(rewards_file: str) -> None:
    problem = _problem(rewards_file, "compute_score")
    assert problem is not None and "(verl style) needs 'method'" in problem
    assert "called once per sample" in problem
    assert _problem(rewards_file, "compute_score", method="flexible") is None
    assert _problem(rewards_file, "verl_ok") is None


def test_callable_functions_pass(rewards_file: str) -> None:
    assert _problem(rewards_file, "good") is None
    assert _problem(rewards_file, "good", scale=2.0) is None
    assert _problem(rewards_file, "starred") is None
    # A setting named like a column is reported too (before the first batch).
    problem = _problem(rewards_file, "good", answer="5")
    assert problem is not None and "same name as dataset columns" in problem
