"""The ``code_tests`` reward: last code block, stdin/stdout and assert cases, reasons."""

from __future__ import annotations

import json
import logging

import pytest

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk_rewards.code_tests import CodeTestsConfig, code_tests, last_code_block
from hfsdk_sandbox import SandboxLimits

pytestmark = pytest.mark.usefixtures("sandbox_any_isolation")

CONFIG = CodeTestsConfig(limits=SandboxLimits(wall_s=3.0, cpu_s=2))
IO = json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]})
ASSERTS = json.dumps({"asserts": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]})


def _fenced(code: str) -> str:
    return f"Here is my answer.\n```python\n{code}\n```\n"


def test_the_last_fenced_block_is_the_program() -> None:
    text = "```python\nprint(1)\n```\nbetter:\n```\nprint(2)\n```"
    assert last_code_block(text).strip() == "print(2)"
    assert last_code_block("no code here") is None


def test_a_block_in_another_language_before_the_python_one_is_passed_over() -> None:
    # findall did not pair fences: a ```bash block before the ```python block made the prose
    # between them "the last block", and a correct solution scored 0.
    bash_first = "Run:\n```bash\necho hi\n```\nNow the solution:\n```python\nprint(2)\n```\n"
    assert last_code_block(bash_first).strip() == "print(2)"
    text_first = "Input:\n```text\n3\n```\nSolution:\n```Python\nprint(3)\n```"
    assert last_code_block(text_first).strip() == "print(3)"
    # A later block in another language is not the program either.
    assert last_code_block("```py\nprint(4)\n```\nthen\n```bash\nrm x\n```").strip() == "print(4)"
    assert last_code_block("```bash\necho hi\n```") is None


def test_backticks_inside_a_line_of_prose_open_no_block() -> None:
    # A fence opened anywhere took "Wrap your code in ``` fences" for a block: it swallowed
    # the real block's opening fence and a correct solution scored no_code.
    mention = "Wrap your code in ``` fences like this:\n```python\nprint(1)\n```\n"
    assert last_code_block(mention) == "print(1)\n"
    inline_tag = "Here is a ```python``` block:\n```python\nprint(2)\n```"
    assert last_code_block(inline_tag) == "print(2)\n"
    # Indented fences (inside a list item) still count; a four-backtick fence is no block.
    assert last_code_block("1. Code:\n  ```python\n  print(3)\n  ```") == "  print(3)\n"
    assert last_code_block("````\nexample\n````\n```python\nprint(4)\n```") == "print(4)\n"
    assert last_code_block("Use ``` to fence code.") is None


def test_a_prose_mention_of_fences_does_not_hide_a_correct_solution() -> None:
    response = "Wrap your code in ``` fences like this:\n" + _fenced(
        "a, b = map(int, input().split())\nprint(a + b)"
    )
    [row] = code_tests(["p"], [response], config=CONFIG, ground_truth=[IO])
    assert row["score"] == 1.0 and row["no_code"] == 0.0, row


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
    assert rows[1]["wrong_answer"] == 1.0 and rows[1]["cases_passed"] == 0.0


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


WRONG_ADD = "def add(a, b):\n    return 0\n"
GAMES = {
    "os_exit_at_top": "import os\n" + WRONG_ADD + "os._exit(0)",
    "os_exit_in_call": "import os\ndef add(a, b):\n    os._exit(0)",
    "system_exit_at_top": WRONG_ADD + "raise SystemExit(0)",
    "system_exit_in_call": "def add(a, b):\n    raise SystemExit(0)",
    "atexit": "import atexit, os\natexit.register(lambda: os._exit(0))\n" + WRONG_ADD,
    "excepthook": "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\n" + WRONG_ADD,
    "always_equal": (
        "class Yes:\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return Yes()"
    ),
    "int_subclass": (
        "class Yes(int):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Yes(0)"
    ),
    "printed_records": (
        "import sys\nfor i in range(2):\n"
        '    sys.stdout.write(\'\\x1fhfsdk-case %d {"values": [["int", "3"], null]}\\n\' % i)\n'
        "sys.stdout.flush()\nimport os\nos._exit(0)"
    ),
}


@pytest.mark.parametrize("name", sorted(GAMES))
def test_programs_that_game_the_asserts_score_zero(name: str) -> None:
    [row] = code_tests(["p"], [_fenced(GAMES[name])], config=CONFIG, ground_truth=[ASSERTS])
    assert row["score"] == 0.0, row
    assert row["cases_passed"] < 1.0


def test_correct_programs_score_one_whatever_they_print_or_how_they_end() -> None:
    programs = [
        "def add(a, b):\n    return a + b",
        "import sys\ndef add(a, b):\n    print('debug', a, b)\n    return a + b\nsys.stdout.flush()",
        "def add(a, b):\n    return sum((a, b))\nif __name__ == '__main__':\n    print(add(2, 2))",
        # Output without a final newline must not swallow the first record.
        "def add(a, b):\n    return a + b\nprint(add(1, 2), end='')",
        "import sys\ndef add(a, b):\n    return a + b\nsys.stdout.write('no newline')",
    ]
    truth = json.dumps(
        {
            "asserts": [
                "assert add(1, 2) == 3",
                "xs = [4, 5]",
                "assert add(*xs) in (9, 10)",
                "assert add(-1, 1) == 0",
                "assert add(0.5, 0.25) == 0.75",
                "assert add(2, 2)",
            ]
        }
    )
    rows = code_tests(
        ["p"] * 5, [_fenced(p) for p in programs], config=CONFIG, ground_truth=[truth] * 5
    )
    assert [r["score"] for r in rows] == [1.0] * 5, rows
    assert all(r["cases_passed"] == 1.0 for r in rows)


def test_an_assert_sample_reports_why_its_program_stopped() -> None:
    programs = ["import ctypes\ndef add(a, b):\n    return a + b", "raise ValueError('nope')"]
    rows = code_tests(["p"] * 2, [_fenced(p) for p in programs], config=CONFIG,
                      ground_truth=[ASSERTS] * 2)  # fmt: skip
    assert rows[0]["refused"] == 1.0 and rows[1]["error"] == 1.0


LOOP_ASSERTS = json.dumps({"asserts": ["for a in (1, 2):\n    assert add(a, a) == 2 * a"]})


@pytest.mark.parametrize("truth", [ASSERTS, LOOP_ASSERTS], ids=["expression", "statement"])
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("x = [0] * 10**9\n    return a + b", "memory"),
        ("return add(a, b)", "error"),
        ("return 1 / 0", "error"),
        ("return a - b + 1", "wrong_answer"),
    ],
    ids=["memory", "recursion", "zero-division", "wrong"],
)
def test_an_assert_case_that_raises_is_flagged_by_its_exception(
    truth: str, body: str, reason: str
) -> None:
    program = _fenced(f"def add(a, b):\n    {body}")
    [row] = code_tests(["p"], [program], config=CONFIG, ground_truth=[truth])
    assert row["score"] == 0.0 and row[reason] == 1.0, row


def test_every_case_is_checked_unless_max_cases_says_otherwise() -> None:
    # 33 cases, the program wrong only on the last one (formerly cut at 32, unreported).
    truth = json.dumps({"asserts": [f"assert double({n}) == {2 * n}" for n in range(33)]})
    program = _fenced("def double(n):\n    return 2 * n if n < 32 else 0")
    [row] = code_tests(["p"], [program], config=CONFIG, ground_truth=[truth])
    assert row["score"] == 0.0 and row["wrong_answer"] == 1.0
    assert "cases_truncated" not in row
    cut = CodeTestsConfig(limits=CONFIG.limits, max_cases=32)
    rows = code_tests(["p", "p"], [program, program], config=cut, ground_truth=[truth, ASSERTS])
    assert rows[0]["score"] == 1.0 and rows[0]["cases_truncated"] == 1.0
    assert rows[1]["cases_truncated"] == 0.0


def test_call_based_cases_call_fn_name_with_the_inputs_as_arguments() -> None:
    truth = json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]})
    wrapped = json.dumps({"fn_name": "pair", "inputs": [[1], [2]], "outputs": [[[1, 1]], [[2, 2]]]})
    programs = {
        "function": ("def add(a, b):\n    return a + b", truth),
        "class Solution": (
            "class Solution:\n    def add(self, a, b):\n        return a + b",
            truth,
        ),
        "a tuple for a list, the output wrapped": ("def pair(x):\n    return (x, x)", wrapped),
        "wrong": ("def add(a, b):\n    return a - b", truth),
        "missing": ("def plus(a, b):\n    return a + b", truth),
    }
    rows = code_tests(["p"] * 5, [_fenced(code) for code, _ in programs.values()], config=CONFIG,
                      ground_truth=[t for _, t in programs.values()])  # fmt: skip
    assert [r["score"] for r in rows] == [1.0, 1.0, 1.0, 0.0, 0.0], rows
    assert rows[3]["wrong_answer"] == 1.0 and rows[3]["cases_passed"] == 0.0
    # The expected return values never enter the sandbox program.
    from hfsdk_rewards.code_harness import plan_calls, sandbox_program

    plan = plan_calls("add", [[1, 2]], [123456789])
    assert "123456789" not in sandbox_program("def add(a, b):\n    return a + b", plan)


def test_call_based_inputs_that_are_not_argument_lists_are_bad_tests() -> None:
    truth = json.dumps({"fn_name": "add", "inputs": ["1 2"], "outputs": [3]})
    [row] = code_tests(["p"], [_fenced("def add(a, b):\n    return a + b")], config=CONFIG,
                       ground_truth=[truth])  # fmt: skip
    assert row["bad_tests"] == 1.0 and row["score"] == 0.0


def test_a_fence_followed_by_crlf_is_code() -> None:
    response = "```python\r\ndef add(a, b):\r\n    return a + b\r\n```\r\n"
    assert last_code_block(response) is not None
    [row] = code_tests(["p"], [response], config=CONFIG, ground_truth=[ASSERTS])
    assert row["score"] == 1.0, row


def test_a_parquet_struct_of_both_test_forms_reads_each_row_by_its_own_keys() -> None:
    # parquet stores a column mixing {inputs, outputs} and {asserts} rows as one struct: each
    # row has every key, the other form's set to None.
    io_row = {"inputs": ["1 2\n"], "outputs": ["3\n"], "asserts": None}
    asserts_row = {"inputs": None, "outputs": None, "asserts": ["assert add(1, 2) == 3"]}
    responses = [
        _fenced("a, b = map(int, input().split())\nprint(a + b)"),
        _fenced("def add(a, b):\n    return a + b"),
    ]
    rows = code_tests(["p", "p"], responses, config=CONFIG, ground_truth=[io_row, asserts_row])
    assert [r["score"] for r in rows] == [1.0, 1.0], rows


def test_badly_formatted_cases_are_named_in_one_warning_per_process(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every sample scored 0.0 and nothing said why ('input'/'output' for 'inputs'/'outputs').
    import hfsdk_rewards.code_tests as module

    monkeypatch.setattr(module, "_warned_bad_tests", False, raising=False)
    bad = json.dumps({"input": ["1 2\n"], "output": ["3\n"]})
    program = _fenced("a, b = map(int, input().split())\nprint(a + b)")
    with caplog.at_level(logging.WARNING, logger="hfsdk_rewards.code_tests"):
        rows = code_tests(["p", "p"], [program] * 2, config=CONFIG, ground_truth=[IO, bad])
        code_tests(["p"], [program], config=CONFIG, ground_truth=[bad])
    assert [r["bad_tests"] for r in rows] == [0.0, 1.0]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "1 of 2 samples have test cases in column 'ground_truth' that cannot be run" in warning
    assert "first: sample 1: expected {'inputs': [...], 'outputs': [...]}" in warning
