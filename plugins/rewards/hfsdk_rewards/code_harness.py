"""The assert-case harness of ``code_tests``: the host, not the program, decides each case.

A sample's asserts (``["assert add(1, 2) == 3", ...]``) are split here, in
the trainer's process, into cases. For ``assert A op B op …`` each operand
that is a literal (``3``, ``[1, 2]``, ``-1.5``, ``None``) is evaluated here
and never sent to the sandbox; the others are evaluated in the sandbox,
after the program, by an epilogue that writes each value as tagged JSON built
only from exact builtin types (``int``, ``float``, ``str``, ``bool``,
``None``, ``bytes``, ``list``, ``tuple``, ``set``, ``frozenset``, ``dict``).
The comparison itself runs here, on values decoded from that JSON, so an
object whose ``__eq__`` always answers ``True`` is not a value at all (the
case fails). ``assert EXPR`` of another form passes when EXPR's value is
truthy. Statements that are not asserts run in the sandbox, in their order
among the cases.

A case passes only when its record arrived: a program that leaves early
(``os._exit(0)``, ``SystemExit``, an ``atexit`` or ``sys.excepthook`` trick)
leaves no records and passes nothing. A program can print fake records, but
they carry values the program chose, which it can return anyway; the
expected literals never enter the sandbox, so it cannot copy them.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from typing import Any

import attrs

MARKER = "\x1fhfsdk-case"


class ReturnMatches:
    """The comparison of a call-based case (not an ``ast`` operator): see :func:`_returns`."""


def _as_json(value: Any) -> Any:
    """``value`` as JSON would hold it: tuples become lists, at any depth."""
    if isinstance(value, tuple | list):
        return [_as_json(x) for x in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def _returns(got: Any, expected: Any) -> bool:
    """A call-based case's check, as APPS and verl's ``prime_code`` make it: the return
    value (tuples read as lists, since JSON has none) equals the expected output, or its
    only element when the dataset wrapped it in a list (``"outputs": [[3], ...]``)."""
    got = _as_json(got)
    if got == expected:
        return True
    return isinstance(expected, list) and len(expected) == 1 and got == expected[0]


_OPS: dict[type, Callable[[Any, Any], bool]] = {
    ReturnMatches: _returns,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


@attrs.frozen
class Operand:
    """One side of a comparison: a literal known here, or an expression for the sandbox."""

    literal: Any = None
    expr: str | None = None


@attrs.frozen
class Case:
    """One assert: operands joined by comparison operators (none: a truth test)."""

    operands: tuple[Operand, ...]
    ops: tuple[type, ...]


@attrs.frozen
class AssertPlan:
    """The cases, and the statements between them (run in the sandbox, in order)."""

    cases: tuple[Case, ...]
    statements: tuple[tuple[int, str], ...] = ()
    """``(number of cases before it, source)`` for each statement that is not an assert."""


class BadTests(ValueError):
    """The asserts do not parse."""


def plan_calls(fn_name: Any, inputs: list[Any], outputs: list[Any]) -> AssertPlan:
    """Call-based cases (APPS, PRIME, verl's ``prime_code``): ``fn_name(*inputs[i])``
    returns ``outputs[i]``. The arguments travel to the sandbox as JSON; the outputs stay
    here. :class:`BadTests` when ``fn_name`` is no identifier or an input is no list."""
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise BadTests(f"'fn_name' is {fn_name!r}; expected the name of a function")
    cases = []
    for index, args in enumerate(inputs):
        if not isinstance(args, list):
            raise BadTests(
                f"call-based input {index} is {type(args).__name__}; expected a list of "
                f"the arguments of {fn_name}"
            )
        call = f"__hfsdk_call__({fn_name!r}, {json.dumps(args)!r})"
        expected = Operand(literal=outputs[index])
        cases.append(Case(operands=(Operand(expr=call), expected), ops=(ReturnMatches,)))
    if not cases:
        raise BadTests("no test case among the inputs")
    return AssertPlan(cases=tuple(cases))


def _operand(node: ast.expr) -> Operand:
    try:
        return Operand(literal=ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return Operand(expr=ast.unparse(node))


def plan_asserts(sources: list[str]) -> AssertPlan:
    """Cases and the statements between them; :class:`BadTests` when they do not parse."""
    statements: list[tuple[int, str]] = []
    cases: list[Case] = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise BadTests(f"an assert does not parse ({exc.msg})") from None
        for stmt in tree.body:
            if not isinstance(stmt, ast.Assert):
                statements.append((len(cases), ast.unparse(stmt)))
                continue
            test = stmt.test
            if isinstance(test, ast.Compare) and all(type(op) in _OPS for op in test.ops):
                operands = tuple(_operand(n) for n in (test.left, *test.comparators))
                cases.append(Case(operands=operands, ops=tuple(type(op) for op in test.ops)))
            else:
                cases.append(Case(operands=(Operand(expr=ast.unparse(test)),), ops=()))
    if not cases:
        raise BadTests("no assert statement among the asserts")
    return AssertPlan(cases=tuple(cases), statements=tuple(statements))


# The epilogue runs in the sandbox. It takes the builtins it needs before the
# program runs; a program that tampers with them only spoils its own records.
_EPILOGUE = r"""
import json as _json, os as _os, sys as _sys
_type, _repr, _len, _list, _sorted = type, repr, len, list, sorted
_isinstance, _getattr, _hasattr = isinstance, getattr, hasattr
_write, _dumps, _loads = _os.write, _json.dumps, _json.loads
_SCALARS = {int: "int", float: "float", str: "str", bool: "bool", bytes: "bytes"}
_SEQS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}


def _enc(v, depth=0):
    t = _type(v)
    if depth > 50:
        raise ValueError("nested too deep")
    if v is None:
        return ["none"]
    if t in _SCALARS:
        if t is int:
            return ["int", _repr(v)]
        if t is float:
            return ["float", _repr(v)]
        if t is bytes:
            return ["bytes", v.hex()]
        return [_SCALARS[t], v]
    if t in _SEQS:
        return [_SEQS[t], [_enc(x, depth + 1) for x in _list(v)]]
    if t is dict:
        return ["dict", [[_enc(k, depth + 1), _enc(x, depth + 1)] for k, x in _list(v.items())]]
    raise TypeError("a value of type " + t.__name__ + " is not plain data")


def _record(i, body):
    _write(1, (MARKER + " " + _repr(i) + " " + _dumps(body) + "\n").encode())


def _call(name, args):
    # A call-based case: LeetCode-style programs define the function in class Solution.
    solution = _ns.get("Solution")
    if _isinstance(solution, type) and _hasattr(solution, name):
        function = _getattr(solution(), name)
    else:
        function = _ns[name]
    return function(*_loads(args))


_ns = {"__name__": "__main__", "__builtins__": __builtins__}
try:
    exec(compile(PROGRAM, "main.py", "exec"), _ns)
except BaseException as _e:  # SystemExit included: the program did not run to the end
    try:
        _why = _type(_e).__name__ + ": " + str(_e)
    except BaseException:
        _why = "an exception"
    _sys.stderr.write("program did not run to the end: " + _why.replace("\n", " ") + "\n")
    _sys.stderr.flush()
    _os._exit(1)
try:
    _sys.stdout.flush()
except BaseException:
    pass
# The program's last line may lack its newline: start the records on a line of their own.
_write(1, b"\n")
_ns["__hfsdk_call__"] = _call
for _i, _step in enumerate(STEPS):
    if _type(_step) is str:  # a statement between asserts
        try:
            exec(compile(_step, "<asserts>", "exec"), _ns)
        except BaseException:
            pass
        continue
    _case, _exprs = _step
    try:
        _vals = [None if _x is None else _enc(eval(_x, _ns)) for _x in _exprs]
        _record(_case, {"values": _vals})
    except BaseException as _e:
        _record(_case, {"error": _type(_e).__name__})
_os._exit(0)
"""


def sandbox_program(code: str, plan: AssertPlan) -> str:
    """The program the sandbox runs: the model's code, then the statements and case expressions."""
    steps: list[Any] = []
    pending = list(plan.statements)
    for index, case in enumerate(plan.cases):
        while pending and pending[0][0] <= index:
            steps.append(pending.pop(0)[1])
        steps.append([index, [op.expr for op in case.operands]])
    return f"MARKER = {MARKER!r}\nPROGRAM = {code!r}\nSTEPS = {steps!r}\n{_EPILOGUE}"


def _decode(node: Any) -> Any:
    tag = node[0]
    if tag == "none":
        return None
    if tag == "int":
        return int(node[1])
    if tag == "float":
        return float(node[1])
    if tag == "bytes":
        return bytes.fromhex(node[1])
    if tag in ("str", "bool"):
        value = node[1]
        if type(value) is not (str if tag == "str" else bool):
            raise ValueError(f"bad {tag}")
        return value
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [_decode(x) for x in node[1]]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        return {_decode(k): _decode(v) for k, v in node[1]}
    raise ValueError(f"unknown tag {tag!r}")


def _records(stdout: str) -> dict[int, list[Any] | None]:
    """Case index -> the record's tagged values (None: errored); duplicates make a case fail."""
    seen: dict[int, list[Any] | None] = {}
    twice: set[int] = set()
    for line in stdout.splitlines():
        if not line.startswith(MARKER + " "):
            continue
        try:
            _, index, body = line.split(" ", 2)
            data = json.loads(body)
            key = int(index)
        except ValueError:
            continue
        if key in seen:
            twice.add(key)
        seen[key] = data.get("values") if isinstance(data, dict) else None
    for key in twice:
        seen[key] = None
    return seen


def _holds(case: Case, tagged: list[Any]) -> bool:
    values = []
    for operand, node in zip(case.operands, tagged, strict=True):
        if operand.expr is None:
            values.append(operand.literal)
        else:
            values.append(_decode(node))
    if not case.ops:
        return bool(values[0])
    for op, left, right in zip(case.ops, values, values[1:], strict=False):
        result = _OPS[op](left, right)
        if type(result) is not bool or not result:
            return False
    return True


def judge(plan: AssertPlan, stdout: str) -> list[bool]:
    """Whether each case passed, from the sandbox's stdout (records this harness decodes)."""
    records = _records(stdout)
    out = []
    for index, case in enumerate(plan.cases):
        tagged = records.get(index)
        try:
            ok = (
                tagged is not None
                and isinstance(tagged, list)
                and len(tagged) == len(case.operands)
                and _holds(case, tagged)
            )
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError):
            ok = False
        out.append(ok)
    return out


__all__ = [
    "MARKER",
    "AssertPlan",
    "BadTests",
    "Case",
    "judge",
    "plan_asserts",
    "plan_calls",
    "sandbox_program",
]
