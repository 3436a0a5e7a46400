"""The assert harness: expected literals stay in the host; records are plain data it decodes."""

from __future__ import annotations

import json

import pytest

from hfsdk_rewards.code_harness import (
    MARKER,
    BadTests,
    judge,
    plan_asserts,
    sandbox_program,
)


def _record(index: int, values: list) -> str:
    return f"{MARKER} {index} {json.dumps({'values': values})}\n"


def test_expected_literals_never_enter_the_sandbox_program() -> None:
    plan = plan_asserts(["assert solve(12) == 31337", "assert 424242 == solve(3)"])
    program = sandbox_program("def solve(n):\n    return n\n", plan)
    assert "31337" not in program and "424242" not in program
    assert "solve(12)" in program and "solve(3)" in program


def test_records_are_compared_here_on_decoded_builtin_values() -> None:
    plan = plan_asserts(
        ["assert f(1) == (1, 2)", "assert f(2) == [1, 2]", "assert g() < 3 <= h()", "assert ok()"]
    )
    tup = ["tuple", [["int", "1"], ["int", "2"]]]
    stdout = (
        "noise printed by the program\n"
        + _record(0, [tup, None])
        + _record(1, [tup, None])  # a tuple is not equal to a list
        + _record(2, [["int", "2"], None, ["float", "3.5"]])
        + _record(3, [["bool", True]])
    )
    assert judge(plan, stdout) == [True, False, True, True]


def test_missing_duplicated_or_malformed_records_fail_their_case() -> None:
    plan = plan_asserts(["assert f() == 1", "assert f() == 1", "assert f() == 1"])
    one = ["int", "1"]
    stdout = _record(1, [one, None]) + _record(1, [one, None]) + f"{MARKER} 2 {{oops\n"
    assert judge(plan, stdout) == [False, False, False]
    assert judge(plan, _record(0, [["object", "x"], None])) == [False, False, False]


def test_asserts_that_do_not_parse_are_bad_tests() -> None:
    with pytest.raises(BadTests):
        plan_asserts(["assert f(1) =="])
    with pytest.raises(BadTests):
        plan_asserts(["x = 1"])
