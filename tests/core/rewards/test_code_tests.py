"""The ``code_tests`` reward: last code block, stdin/stdout and assert cases, reasons."""

from __future__ import annotations

import json

import pytest

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk.core.rewards.code_tests import CodeTestsConfig, code_tests, last_code_block
from hfsdk.core.sandbox import SandboxLimits

CONFIG = CodeTestsConfig(limits=SandboxLimits(wall_s=3.0, cpu_s=2))
IO = json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]})
ASSERTS = json.dumps({"asserts": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]})


def _fenced(code: str) -> str:
    return f"Here is my answer.\n```python\n{code}\n```\n"


def test_the_last_fenced_block_is_the_program() -> None:
    text = "```python\nprint(1)\n```\nbetter:\n```\nprint(2)\n```"
    assert last_code_block(text).strip() == "print(2)"
    assert last_code_block("no code here") is None


def test_stdin_stdout_cases_score_one_only_when_all_pass() -> None:
    right = _fenced("a, b = map(int, input().split())\nprint(a + b)")
    half = _fenced("a, b = map(int, input().split())\nprint(3)")
    rows = code_tests(["p", "p"], [right, half], config=CONFIG, ground_truth=[IO, IO])
    assert [r["score"] for r in rows] == [1.0, 0.0]
    assert rows[1]["cases_passed"] == 0.5 and rows[1]["wrong_answer"] == 1.0


def test_assert_cases_run_after_the_program() -> None:
    good = _fenced("def add(a, b):\n    return a + b")
    bad = _fenced("def add(a, b):\n    return a - b")
    rows = code_tests(["p", "p"], [good, bad], config=CONFIG, ground_truth=[ASSERTS, ASSERTS])
    assert [r["score"] for r in rows] == [1.0, 0.0]
    assert rows[1]["error"] == 1.0


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("while True:\n    pass", "timeout"),
        ("import os\nwhile True:\n    os.fork()", "refused"),
        ("x = bytearray(1 << 31)", "memory"),
        ("print('x' * 10**7)", "output_limit"),
        ("open('/etc/hfsdk_probe', 'w')", "refused"),
    ],
)
def test_hostile_programs_score_zero_with_a_reason(code: str, reason: str) -> None:
    [row] = code_tests(["p"], [_fenced(code)], config=CONFIG, ground_truth=[IO])
    assert row["score"] == 0.0 and row[reason] == 1.0, row


def test_missing_code_and_bad_cases_are_reasons_not_crashes() -> None:
    rows = code_tests(
        ["p", "p"], ["just text", _fenced("print(1)")], config=CONFIG, ground_truth=[IO, "{oops"]
    )
    assert rows[0]["no_code"] == 1.0 and rows[1]["bad_tests"] == 1.0
    assert all(r["score"] == 0.0 for r in rows)


def test_a_missing_column_is_one_clear_error() -> None:
    with pytest.raises(HfsdkError, match=r"code_tests needs the dataset column 'ground_truth'"):
        code_tests(["p"], ["r"], config=CONFIG, answer=["x"])


def test_it_is_registered_with_its_config() -> None:
    entry = hfsdk.get_registry("reward_functions")["code_tests"]
    assert entry.impl is code_tests and entry.config_cls is CodeTestsConfig
