"""``code_tests`` with slow or failing programs: a sample stops at its first failing case.

Every case of every sample was queued at once, so four endless samples of four stdin cases
cost sixteen sandbox runs and overran ``reward.timeout_s``; one failing case already scores
a sample 0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

import hfsdk_rewards.code_tests as code_tests_module
from hfsdk_rewards.code_tests import CodeTestsConfig, code_tests
from hfsdk_sandbox import SandboxLimits, SandboxResult

pytestmark = pytest.mark.usefixtures("sandbox_any_isolation")

CONFIG = CodeTestsConfig(limits=SandboxLimits(wall_s=3.0, cpu_s=1), concurrency=4)
LOOP = "```python\nwhile True:\n    pass\n```"


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wrap the reward's ``run_many``: the returned list gets each call's number of jobs."""
    calls: list[int] = []
    real = code_tests_module.run_many

    def counting(jobs: Sequence[tuple[str, str]], **kwargs: object) -> list[SandboxResult]:
        calls.append(len(jobs))
        return real(jobs, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(code_tests_module, "run_many", counting)
    return calls


def test_endless_samples_run_one_case_each(monkeypatch: pytest.MonkeyPatch) -> None:
    # The reviewer's rows: 4 samples x 4 stdin cases of `while True: pass`.
    calls = _count_runs(monkeypatch)
    truth = json.dumps({"inputs": ["1\n"] * 4, "outputs": ["1\n"] * 4})
    rows = code_tests(["p"] * 4, [LOOP] * 4, config=CONFIG, ground_truth=[truth] * 4)
    assert [(r["score"], r["timeout"], r["cases_passed"]) for r in rows] == [(0.0, 1.0, 0.0)] * 4
    assert sum(calls) == 4, calls  # samples, not samples x cases (16)


def test_cases_passed_counts_the_cases_run_before_the_first_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _count_runs(monkeypatch)
    truth = json.dumps(
        {"inputs": ["1\n", "2\n", "3\n", "4\n"], "outputs": ["1\n", "2\n", "3\n", "4\n"]}
    )
    echo = "```python\nprint(input())\n```"
    # Right on case 1, wrong on case 2 (and on 4; case 3 would pass but is not run).
    wrong_at_2 = "```python\nn = int(input())\nprint(n if n in (1, 3) else 0)\n```"
    rows = code_tests(["p", "p"], [echo, wrong_at_2], config=CONFIG, ground_truth=[truth] * 2)
    assert (rows[0]["score"], rows[0]["cases_passed"]) == (1.0, 1.0)
    assert (rows[1]["score"], rows[1]["cases_passed"], rows[1]["wrong_answer"]) == (0.0, 0.25, 1.0)
    assert calls == [2, 2, 1, 1], calls  # waves: case k of each sample still passing


def test_the_first_failure_names_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    truth = json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["1\n", "2\n"]})
    # Wrong on case 1, then endless: the reason is the first failure's and case 2 never runs.
    program = "```python\nn = int(input())\nprint(0)\nwhile n == 2:\n    pass\n```"
    calls = _count_runs(monkeypatch)
    [row] = code_tests(["p"], [program], config=CONFIG, ground_truth=[truth])
    assert (row["wrong_answer"], row["timeout"], row["cases_passed"]) == (1.0, 0.0, 0.0)
    assert calls == [1]


def test_asserts_and_stdin_samples_share_the_first_wave(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_runs(monkeypatch)
    asserts = json.dumps({"asserts": ["assert add(1, 2) == 3"]})
    io = json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["1\n", "2\n"]})
    responses = [
        "```python\ndef add(a, b):\n    return a + b\n```",
        "```python\nprint(input())\n```",
    ]
    rows = code_tests(["p", "p"], responses, config=CONFIG, ground_truth=[asserts, io])
    assert [r["score"] for r in rows] == [1.0, 1.0]
    assert calls == [2, 1]


def test_a_lone_surrogate_fails_only_its_own_sample() -> None:
    # write_text raised UnicodeEncodeError: the whole reward call failed.
    truth = json.dumps({"inputs": ["a\n"], "outputs": ["a\n"]})
    surrogate_stdin = json.dumps({"inputs": ["a\ud83d\n"], "outputs": ["a\n"]})
    responses = [
        "```python\nprint('\ud83d')\n```",  # code that cannot be UTF-8: fails to compile
        "```python\nprint(input())\n```",
        "```python\nprint(input())\n```",
    ]
    rows = code_tests(
        ["p"] * 3, responses, config=CONFIG, ground_truth=[truth, surrogate_stdin, truth]
    )
    assert rows[0]["error"] == 1.0, rows[0]
    assert rows[1]["score"] == 0.0 and rows[1]["error"] + rows[1]["wrong_answer"] == 1.0
    assert rows[2]["score"] == 1.0
