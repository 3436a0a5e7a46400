"""The assert harness: expected literals stay in the host; records are plain data it decodes."""

from __future__ import annotations

import json

import pytest

from hfsdk_rewards.code_harness import (
    MARKER,
    AssertPlan,
    BadTests,
    judge,
    plan_asserts,
    sandbox_program,
)
from hfsdk_rewards.code_tests import CodeTestsConfig, code_tests
from hfsdk_sandbox import SandboxLimits


def _record(plan: AssertPlan, index: int, values: list) -> str:
    return f"{MARKER} {plan.nonce} {index} {json.dumps({'values': values})}\n"


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
        + _record(plan, 0, [tup, None])
        + _record(plan, 1, [tup, None])  # a tuple is not equal to a list
        + _record(plan, 2, [["int", "2"], None, ["float", "3.5"]])
        + _record(plan, 3, [["bool", True]])
    )
    assert judge(plan, stdout) == [True, False, True, True]


def test_missing_duplicated_or_malformed_records_fail_their_case() -> None:
    plan = plan_asserts(["assert f() == 1", "assert f() == 1", "assert f() == 1"])
    one = ["int", "1"]
    stdout = _record(plan, 1, [one, None]) + _record(plan, 1, [one, None])
    stdout += f"{MARKER} {plan.nonce} 2 {{oops\n"
    assert judge(plan, stdout) == [False, False, False]
    assert judge(plan, _record(plan, 0, [["object", "x"], None])) == [False, False, False]


def test_asserts_that_do_not_parse_are_bad_tests() -> None:
    with pytest.raises(BadTests):
        plan_asserts(["assert f(1) =="])
    with pytest.raises(BadTests):
        plan_asserts(["x = 1"])


def test_records_without_this_runs_nonce_are_ignored() -> None:
    plan = plan_asserts(["assert ok()"])
    assert plan.nonce != plan_asserts(["assert ok()"]).nonce
    true = json.dumps({"values": [["bool", True]]})
    assert judge(plan, f"{MARKER} 0 {true}\n") == [False]
    assert judge(plan, f"{MARKER} {'0' * 16} 0 {true}\n") == [False]
    assert judge(plan, f"{MARKER} {plan.nonce} 0 {true}\n") == [True]


def test_builtins_not_and_arithmetic_are_evaluated_here() -> None:
    plan = plan_asserts(
        [
            "assert sorted(f([5])) == sorted([9, 1])",
            "assert math.isclose(area(2), 12.566, rel_tol=0.001)",
            "assert abs(mean([1.0, 2.0]) - 1.5) < 1e-6",
            "assert not is_prime(8)",
        ]
    )
    keyed = sandbox_program("", plan_asserts(["assert sorted(f(), key=len) == ['b', 'aa']"]))
    assert "'f()'" in keyed and "'sorted(" not in keyed and "'aa'" not in keyed
    program = sandbox_program("", plan)
    # Only the leaves travel: no expected value, no call that the program could shadow.
    for sent in ("'f([5])'", "'area(2)'", "'mean([1.0, 2.0])'", "'is_prime(8)'"):
        assert sent in program, sent
    for kept in ("12.566", "1e-06", "[9, 1]", "'sorted(", "'math.isclose(", "'abs(", "'not "):
        assert kept not in program, kept

    # One value per leaf, left to right; None where the leaf is a literal known here.
    def records(first: list, second: list, third: list, fourth: list) -> str:
        leaves = ([first, None], [second, None], [third, None, None], [fourth])
        return "".join(_record(plan, i, v) for i, v in enumerate(leaves))

    nine_one = ["list", [["int", "9"], ["int", "1"]]]
    right = records(nine_one, ["float", "12.57"], ["float", "1.5"], ["bool", False])
    assert judge(plan, right) == [True, True, True, True]
    wrong = records(["int", "0"], ["float", "-1.0"], ["float", "0.0"], ["bool", True])
    assert judge(plan, wrong) == [False, False, False, False]


def test_what_cannot_be_evaluated_here_fails_its_case_without_raising() -> None:
    plan = plan_asserts(
        [
            "assert f() / 0 == 1",
            "assert sorted(f()) == [1]",
            "assert f() * 100000000 == ''",
            "assert round(f(), -1000000) == 0",
            "assert f() * f() == 0",
            "assert float(f()) == 1.0",
        ]
    )
    big = ["int", "f" * (1 << 18)]  # 2**20 bits each
    mixed = ["list", [["int", "1"], ["str", "a"]]]
    tagged = [["int", "1"]], [mixed], [["str", "ab"]], [["int", "5"]], [big, big], [big]
    stdout = "".join(_record(plan, i, [*v, None]) for i, v in enumerate(tagged))
    assert judge(plan, stdout) == [False] * 6


def test_values_decode_to_their_base_types() -> None:
    plan = plan_asserts(["assert f() == 2j", "assert f() == 2 ** 20000", "assert f() == -255"])
    big = format(2**20000, "x")
    stdout = _record(plan, 0, [["complex", ["0.0", "2.0"]], None])
    stdout += _record(plan, 1, [["int", big], ["int", big]]) + _record(
        plan, 2, [["int", "-ff"], None]
    )
    assert judge(plan, stdout) == [True, True, True]


def test_statements_holding_asserts_are_cases_of_their_own() -> None:
    plan = plan_asserts(
        ["import math", "for x in range(3):\n    assert f(x) == 2 * x", "assert f(1) == 2"]
    )
    assert [case.statement is not None for case in plan.cases] == [True, False]
    # HumanEval: the definition runs as a statement, its call is the case.
    humaneval = plan_asserts(["def check(c):\n    assert c(1) == 2", "check(f)"])
    assert [case.statement for case in humaneval.cases] == ["check(f)"]
    assert [source for _, source in humaneval.statements] == ["def check(c):\n    assert c(1) == 2"]
    ok = f"{MARKER} {plan.nonce} 0 {json.dumps({'ok': True})}\n"
    failed = f"{MARKER} {plan.nonce} 0 {json.dumps({'error': 'statement'})}\n"
    two = _record(plan, 1, [["int", "2"], None])
    assert judge(plan, ok + two) == [True, True]
    assert judge(plan, failed + two) == [False, True]


CONFIG = CodeTestsConfig(limits=SandboxLimits(wall_s=5.0, cpu_s=4))
PRIME = ["assert is_prime(7)", "assert not is_prime(8)", "assert is_prime(13)"]
LOOPS = [
    "assert double(0) == 0",
    "for x in range(1, 50):\n    assert double(x) == 2 * x",
    "if True:\n    assert double(7) == 14",
    "with open('/dev/null') as _f:\n    assert double(3) == 6",
]
ISCLOSE = ["import math", "assert math.isclose(area(2), 12.566, rel_tol=0.001)"]
ABS = ["assert abs(mean([1.0, 2.0]) - 1.5) < 1e-6"]
HIDDEN = ("STEPS", "MARKER", "PROGRAM", "_record", "_exprs")
# name: (program, asserts, expected score)
SAMPLES = {
    "loop asserts, wrong": ("def double(n):\n    return 0", LOOPS, 0.0),
    "loop asserts, right": ("def double(n):\n    return 2 * n", LOOPS, 1.0),
    "shadowed sorted": (
        "def f(x):\n    return [0]\ndef sorted(*a):\n    return 0",
        ["assert sorted(f([5])) == sorted([9, 1])"],
        0.0,
    ),
    "patched isclose": (
        "import math\nmath.isclose = lambda *a, **k: True\ndef area(r):\n    return -1",
        ISCLOSE,
        0.0,
    ),
    "shadowed abs": ("def mean(xs):\n    return 0.0\ndef abs(x):\n    return 0", ABS, 0.0),
    "polarity read from the harness": (
        "import sys\ndef is_prime(n):\n    src = getattr(sys.modules['__main__'], '_exprs', [''])[0]\n"
        "    return not src.startswith('not')",
        PRIME,
        0.0,
    ),
    "printed records": (
        "import os\ndef is_prime(n):\n    return False\nfor i in range(3):\n"
        '    os.write(1, b\'\\x1fhfsdk-case %d {"values": [["bool", true]]}\\n\' % i)\n'
        "os._exit(0)",
        ["assert is_prime(7)", "assert is_prime(13)", "assert is_prime(17)"],
        0.0,
    ),
    "isclose, right": ("import math\ndef area(r):\n    return math.pi * r * r", ISCLOSE, 1.0),
    "abs, right": ("def mean(xs):\n    return sum(xs) / len(xs)", ABS, 1.0),
    "is_prime, right": (
        "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))",
        PRIME,
        1.0,
    ),
    "Counter for a dict": (
        "import collections\ndef freq(xs):\n    return collections.Counter(xs)",
        ["assert freq([10, 10, 20]) == ({10: 2, 20: 1})"],
        1.0,
    ),
    "defaultdict": (
        "from collections import defaultdict\ndef count(s):\n    d = defaultdict(int)\n"
        "    for c in s:\n        d[c] += 1\n    return d",
        ["assert count('aab') == {'a': 2, 'b': 1}"],
        1.0,
    ),
    "complex": ("def f(x):\n    return x * 1j", ["assert f(2) == 2j"], 1.0),
    "int past repr's digit limit": (
        "def fact(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r",
        ["import math", "assert fact(2000) == math.factorial(2000)"],
        1.0,
    ),
    "pickle of a program class": (
        "import pickle\nclass Node:\n    def __init__(self, v):\n        self.v = v\n"
        "def f(n):\n    return pickle.loads(pickle.dumps(Node(n))).v",
        ["assert f(2) == 2"],
        1.0,
    ),
    "get_type_hints of a program dataclass": (
        "from __future__ import annotations\nimport typing\nfrom dataclasses import dataclass\n"
        "@dataclass\nclass P:\n    x: int\n    ys: typing.ClassVar[int] = 3\n"
        "def f(n):\n    return typing.get_type_hints(P)['x'] is int and P(n).x",
        ["assert f(2) == 2"],
        1.0,
    ),
    "iterables and objects given to the builtins": (
        "class Stack:\n    def __len__(self):\n        return 2\n    def __str__(self):\n"
        "        return 'S'\nclass Empty:\n    def __len__(self):\n        return 0\n"
        "def evens(n):\n    return (x for x in range(0, n, 2))\n"
        "def keys(d):\n    return d.keys()",
        [
            "assert sorted(evens(5)) == [0, 2, 4]",
            "assert set(keys({'a': 1})) == {'a'}",
            "assert sum(evens(5)) == 6",
            "assert max(evens(5)) == 4",
            "assert tuple(map(abs, [-1])) == (1,)",
            "assert len(Stack()) == 2",
            "assert str(Stack()) == 'S'",
            "assert not Empty()",
        ],
        1.0,
    ),
    "harness state out of __main__": (
        f"import sys\ndef f():\n    m = sys.modules['__main__']\n"
        f"    return [n for n in {HIDDEN!r} if hasattr(m, n)]",
        ["assert f() == []"],
        1.0,
    ),
}


@pytest.mark.usefixtures("sandbox_any_isolation")
def test_games_score_zero_and_honest_programs_one() -> None:
    names = list(SAMPLES)
    responses = [f"```python\n{SAMPLES[n][0]}\n```" for n in names]
    truths = [json.dumps({"asserts": SAMPLES[n][1]}) for n in names]
    rows = code_tests(["p"] * len(names), responses, config=CONFIG, ground_truth=truths)
    got = {name: row["score"] for name, row in zip(names, rows, strict=True)}
    assert got == {name: SAMPLES[name][2] for name in names}, rows
