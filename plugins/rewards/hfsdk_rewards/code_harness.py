"""The assert-case harness of ``code_tests``: the host, not the program, decides each case.

A sample's asserts (``["assert add(1, 2) == 3", ...]``) are split here, in
the trainer's process, into cases. For ``assert A op B op …`` (or a truth test
``assert A``) each operand is planned as a small tree that this process
evaluates on plain values: literals (``3``, ``[1, 2]``, ``-1.5``, ``None``),
``not X``, ``X + Y``, ``X - Y``, ``X * Y``, ``X / Y``, ``-X``, and calls of a
fixed set of pure builtins (``set``, ``sorted``, ``frozenset``, ``list``,
``tuple``, ``len``, ``abs``, ``round``, ``sum``, ``min``, ``max``, ``bool``,
``str``, ``int``, ``float``) and ``math.isclose`` with keyword arguments that
are literals (or ``key=`` one of those builtins) — always the real ones,
whatever names the program rebinds. Only the other leaves (``f(x)``; an
expected side such as ``sorted(xs, key=lambda t: t[1])`` whole, with the
program's names) are evaluated in the sandbox, after the program,
by an epilogue that writes each value as tagged JSON of plain data, read
through the base types' own methods (a ``Counter`` is its ``dict`` data, an
``int`` subclass its ``int`` value); a leaf that is the sole argument of one
of those calls and no plain data (a generator) is first passed there through
the real ``list`` (or the call itself: ``len``, ``str`` …). The comparisons
run here on the decoded values, so an object whose ``__eq__`` always answers
``True`` is no value at all (the case fails), and the expected literals never
enter the sandbox.

A statement among the asserts that holds an ``assert`` (``for x in xs:
assert f(x) == 2 * x``), or is a bare expression (``check(f)``), is a case
of its own, decided in the sandbox: it passes when it ran without raising,
with the program's own objects (an always-equal object passes it). Other
statements (imports, helpers, assignments) run there in order; their
failures are ignored.

The program runs as the real ``__main__`` module (``pickle`` and
``typing.get_type_hints`` find its classes); the harness's state lives in a
function outside that module. Records carry a random nonce made here for
each plan; lines without it are ignored. A case passes only when its record
arrived: a program that leaves early (``os._exit(0)``, ``SystemExit``, an
``atexit`` or ``sys.excepthook`` trick) leaves no records and passes nothing.
A program that digs the nonce out of the harness's memory (frames, ``gc``)
and prints records before leaving early can still forge what the sandbox
decides: the values of sandbox-evaluated expressions (which it could return
anyway) and the ok of statement cases.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import secrets
from collections.abc import Callable, Iterator
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
    """A leaf of an operand: a literal known here, or an expression for the sandbox."""

    literal: Any = None
    expr: str | None = None
    via: str | None = None
    """The planned call (or ``not``) this expression is the sole argument of: when its
    value is no plain data (a generator, ``dict_keys``, an object with ``__len__``), the
    sandbox sends ``list(value)`` (``via`` in :data:`_ITERATING`) or applies ``via``
    itself (:data:`_APPLYING`) with the builtin it took before the program ran."""


@attrs.frozen
class Apply:
    """A function of :data:`_APPLY` applied here to planned operands and literal keywords."""

    fn: str
    args: tuple[Operand | Apply, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()


@attrs.frozen
class Case:
    """One assert: operands joined by comparison operators (none: a truth test).

    A statement case (``statement`` set, no operands) is a loop or block holding asserts,
    or a bare expression, that passes when it ran in the sandbox without raising.
    """

    operands: tuple[Operand | Apply, ...]
    ops: tuple[type, ...]
    statement: str | None = None


def _new_nonce() -> str:
    return secrets.token_hex(8)


@attrs.frozen
class AssertPlan:
    """The cases, and the statements between them (run in the sandbox, in order)."""

    cases: tuple[Case, ...]
    statements: tuple[tuple[int, str], ...] = ()
    """``(number of cases before it, source)`` for each statement that is not a case."""
    nonce: str = attrs.field(factory=_new_nonce, repr=False)
    """Random, made here: only records that carry it count (printed fakes lack it)."""


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


# Work bounds of the functions evaluated here on values a program chose: a value's
# weight (its items and characters) made by repetition, the bits of an int product,
# and round's ndigits (round(n, -k) computes 10**k).
_MAX_WEIGHT = 1_000_000
_MAX_PRODUCT_BITS = 1 << 20
_MAX_NDIGITS = 10_000


class _TooMuchWork(ValueError):
    """Evaluating an operand here would cost more than the bounds allow (the case fails)."""


def _weight(value: Any) -> int:
    """Items and characters of ``value``, at any depth (shared items count each time)."""
    if isinstance(value, list | tuple | set | frozenset):
        return 1 + sum(_weight(x) for x in value)
    if isinstance(value, dict):
        return 1 + sum(_weight(k) + _weight(v) for k, v in value.items())
    if isinstance(value, str | bytes):
        return 1 + len(value)
    return 1


def _mul(left: Any, right: Any) -> Any:
    """``left * right``, refused where a repetition or an int product grows past the bounds."""
    for seq, times in ((left, right), (right, left)):
        if isinstance(seq, str | bytes | list | tuple) and isinstance(times, int):
            if times > _MAX_WEIGHT or (times > 0 and _weight(seq) * times > _MAX_WEIGHT):
                raise _TooMuchWork("repetition too large")
            return left * right
    both_ints = isinstance(left, int) and isinstance(right, int)
    if both_ints and left.bit_length() + right.bit_length() > _MAX_PRODUCT_BITS:
        raise _TooMuchWork("int product too large")
    return left * right


def _round(number: Any, ndigits: Any = None) -> Any:
    """``round``, refused for an int ``ndigits`` past :data:`_MAX_NDIGITS`."""
    if isinstance(ndigits, int) and abs(ndigits) > _MAX_NDIGITS:
        raise _TooMuchWork("round's ndigits too large")
    return round(number, ndigits)


# The calls planned here: pure, and the real ones whatever the program rebinds.
_CALLS: dict[str, Callable[..., Any]] = {
    "set": set,
    "sorted": sorted,
    "frozenset": frozenset,
    "list": list,
    "tuple": tuple,
    "len": len,
    "abs": abs,
    "round": _round,
    "sum": sum,
    "min": min,
    "max": max,
    "bool": bool,
    "str": str,
    "int": int,
    "float": float,
    "math.isclose": math.isclose,
}
# The calls the same whether they get an iterable or the list of its items.
_ITERATING = ("list", "tuple", "set", "frozenset", "sorted", "sum", "min", "max")
_APPLYING = ("len", "str", "bool", "int", "float", "abs", "not")
_UNARY = {ast.Not: "not", ast.USub: "neg", ast.UAdd: "pos"}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_APPLY: dict[str, Callable[..., Any]] = {
    **_CALLS,
    "not": operator.not_,
    "neg": operator.neg,
    "pos": operator.pos,
    "+": operator.add,
    "-": operator.sub,
    "*": _mul,
    "/": operator.truediv,
}


def _literal(node: ast.expr) -> tuple[bool, Any]:
    """``(True, value)`` when ``node`` is a literal, else ``(False, None)``."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _call_name(func: ast.expr) -> str | None:
    """The :data:`_CALLS` name ``func`` spells (``sorted``, ``math.isclose``), or ``None``."""
    if isinstance(func, ast.Name):
        name = func.id
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        name = f"{func.value.id}.{func.attr}"
    else:
        return None
    return name if name in _CALLS else None


def _plan_call(node: ast.Call) -> Apply | None:
    """A whitelisted call with literal keywords (or ``key=`` one of those builtins), planned
    here; ``None``: for the sandbox."""
    name = _call_name(node.func)
    if name is None or any(isinstance(arg, ast.Starred) for arg in node.args):
        return None
    kwargs: list[tuple[str, Any]] = []
    for keyword in node.keywords:
        is_literal, value = _literal(keyword.value)
        if isinstance(keyword.value, ast.Name) and keyword.value.id in _CALLS:
            is_literal, value = True, _CALLS[keyword.value.id]  # key=len: the real one
        if keyword.arg is None or not is_literal:
            return None
        kwargs.append((keyword.arg, value))
    if name == "sum":
        # A non-numeric start (sum(xs, [])) adds in quadratic time: leave it to the sandbox.
        starts = [_literal(arg) for arg in node.args[1:]]
        starts += [(True, value) for key, value in kwargs if key == "start"]
        if not all(ok and isinstance(v, int | float | complex) for ok, v in starts):
            return None
    args = tuple(_operand(arg) for arg in node.args)
    sole = len(args) == 1 and not kwargs
    if args and (name in ("list", "tuple", "set", "frozenset", "sorted", "sum") or sole):
        args = (_via(args[0], name), *args[1:])
    return Apply(name, args, tuple(kwargs))


def _via(operand: Operand | Apply, name: str) -> Operand | Apply:
    """``operand``, told (when it is a sandbox expression) the call it is the argument of."""
    planned_here = isinstance(operand, Operand) and operand.expr is None
    if isinstance(operand, Apply) or planned_here or name not in (*_ITERATING, *_APPLYING):
        return operand
    return attrs.evolve(operand, via=name)


def _operand(node: ast.expr) -> Operand | Apply:
    """``node`` planned: evaluated here where it is a literal, ``not``, arithmetic or a
    whitelisted call (recursively); anything else is an expression for the sandbox."""
    is_literal, value = _literal(node)
    if is_literal:
        return Operand(literal=value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        name = _UNARY[type(node.op)]
        return Apply(name, (_via(_operand(node.operand), name),))
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        return Apply(_ARITH[type(node.op)], (_operand(node.left), _operand(node.right)))
    if isinstance(node, ast.Call) and (call := _plan_call(node)) is not None:
        return call
    return Operand(expr=ast.unparse(node))


def _is_statement_case(stmt: ast.stmt) -> bool:
    """Whether a statement decides something: it holds an assert (a loop, an ``if``, a
    ``with``) or is a bare expression (HumanEval's ``check(candidate)``). A definition
    (HumanEval's ``def check(candidate): assert ...``) decides nothing until it is called."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return False
    return isinstance(stmt, ast.Expr) or any(isinstance(n, ast.Assert) for n in ast.walk(stmt))


def _assert_case(test: ast.expr) -> Case:
    if isinstance(test, ast.Compare) and all(type(op) in _OPS for op in test.ops):
        operands = tuple(_operand(n) for n in (test.left, *test.comparators))
        return Case(operands=operands, ops=tuple(type(op) for op in test.ops))
    return Case(operands=(_operand(test),), ops=())


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
            if isinstance(stmt, ast.Assert):
                cases.append(_assert_case(stmt.test))
            elif _is_statement_case(stmt):
                cases.append(Case(operands=(), ops=(), statement=ast.unparse(stmt)))
            else:
                statements.append((len(cases), ast.unparse(stmt)))
    if not cases:
        raise BadTests("no assert statement among the asserts")
    return AssertPlan(cases=tuple(cases), statements=tuple(statements))


def _leaves(node: Operand | Apply) -> Iterator[Operand]:
    """The leaves of an operand tree, left to right (the order the sandbox records them)."""
    if isinstance(node, Operand):
        yield node
        return
    for arg in node.args:
        yield from _leaves(arg)


def _case_leaves(case: Case) -> list[Operand]:
    return [leaf for operand in case.operands for leaf in _leaves(operand)]


# The epilogue runs in the sandbox, after the program, which runs in a fresh __main__
# module. Its state (the marker and nonce, the steps, these helpers) stays in the
# function's frame, out of that module; it takes the builtins it needs before the
# program runs, so a program that rebinds them only spoils its own records.
_EPILOGUE = r"""
def _hfsdk_harness(marker, program, steps, iterating):
    import builtins, json, os, sys, types

    type_, isinstance_, repr_, str_ = type, isinstance, repr, str
    int_, float_, complex_, bytes_, bytearray_ = int, float, complex, bytes, bytearray
    list_, dict_, hasattr_, getattr_ = list, dict, hasattr, getattr
    exec_, eval_, compile_, base_exception = exec, eval, compile, BaseException
    write, exit_, dumps, loads = os.write, os._exit, json.dumps, json.loads
    seqs = ((list, "list"), (tuple, "tuple"), (set, "set"), (frozenset, "frozenset"))

    def enc(v, depth=0):
        # The base types' own methods read the data: a subclass's overrides never run,
        # and an object that only claims a base type (__class__) makes them raise.
        if depth > 50:
            raise ValueError("nested too deep")
        if v is None:
            return ["none"]
        if v is True or v is False:
            return ["bool", v]
        if isinstance_(v, int_):
            return ["int", int_.__format__(v, "x")]
        if isinstance_(v, float_):
            return ["float", float_.__repr__(v)]
        if isinstance_(v, complex_):
            real, imag = complex_.__getnewargs__(v)
            return ["complex", [float_.__repr__(real), float_.__repr__(imag)]]
        if isinstance_(v, str_):
            return ["str", str_.__str__(v)]
        if isinstance_(v, bytes_):
            return ["bytes", bytes_.hex(v)]
        if isinstance_(v, bytearray_):
            return ["bytes", bytearray_.hex(v)]
        for base, tag in seqs:
            if isinstance_(v, base):
                return [tag, [enc(x, depth + 1) for x in list_(base.__iter__(v))]]
        if isinstance_(v, dict_):
            items = list_(dict_.items(v))
            return ["dict", [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in items]]
        raise TypeError("a value of type " + type_(v).__name__ + " is not plain data")

    applying = {"len": len, "str": str, "bool": bool, "int": int, "float": float, "abs": abs}
    applying["not"] = lambda v: not v

    def leaf(expr, via):
        value = eval_(expr, namespace)
        try:
            return enc(value)
        except base_exception:
            # No plain data: the planned call's argument is read with the real builtins.
            if via in iterating:
                return enc(list_(value))
            if via in applying:
                return ["applied", enc(applying[via](value))]
            raise

    def record(index, body):
        write(1, (marker + " " + repr_(index) + " " + body + "\n").encode())

    def failed(kind, exc):
        # The exception's class name lets the reward flag memory and errors, not wrong answers.
        try:
            return dumps({"error": kind, "raised": str_.__str__(type_(exc).__name__)})
        except base_exception:
            return '{"error": "' + kind + '"}'

    main = types.ModuleType("__main__")
    main.__file__ = globals().get("__file__", "main.py")
    namespace = main.__dict__
    namespace["__builtins__"] = builtins
    sys.modules["__main__"] = main

    def call(name, args):
        # A call-based case: LeetCode-style programs define the function in class Solution.
        solution = namespace.get("Solution")
        if isinstance_(solution, type_) and hasattr_(solution, name):
            function = getattr_(solution(), name)
        else:
            function = namespace[name]
        return function(*loads(args))

    try:
        exec_(compile_(program, "main.py", "exec"), namespace)
    except base_exception as exc:  # SystemExit included: the program did not run to the end
        try:
            why = type_(exc).__name__ + ": " + str_(exc)
        except base_exception:
            why = "an exception"
        why = "program did not run to the end: " + why.replace("\n", " ") + "\n"
        write(2, why.encode("utf-8", "replace"))
        exit_(1)
    try:
        sys.stdout.flush()
    except base_exception:
        pass
    # The program's last line may lack its newline: start the records on a line of their own.
    write(1, b"\n")
    namespace["__hfsdk_call__"] = call
    for step in steps:
        if step[0] == "run":  # a statement between cases
            try:
                exec_(compile_(step[1], "<asserts>", "exec"), namespace)
            except base_exception:
                pass
        elif step[0] == "check":  # a statement case: it passes when it raises nothing
            try:
                exec_(compile_(step[2], "<asserts>", "exec"), namespace)
                body = '{"ok": true}'
            except base_exception as exc:
                body = failed("statement", exc)
            record(step[1], body)
        else:
            try:
                values = [None if x is None else leaf(*x) for x in step[2]]
                body = dumps({"values": values})
            except base_exception as exc:
                body = failed("expression", exc)
            record(step[1], body)
    exit_(0)
"""


def sandbox_program(code: str, plan: AssertPlan) -> str:
    """The program the sandbox runs: the model's code, then the statements and case expressions."""
    steps: list[Any] = []
    pending = list(plan.statements)
    for index, case in enumerate(plan.cases):
        while pending and pending[0][0] <= index:
            steps.append(["run", pending.pop(0)[1]])
        if case.statement is not None:
            steps.append(["check", index, case.statement])
        else:
            exprs = [None if x.expr is None else [x.expr, x.via] for x in _case_leaves(case)]
            steps.append(["eval", index, exprs])
    marker = f"{MARKER} {plan.nonce}"
    args = f"{marker!r}, {code!r}, {steps!r}, {_ITERATING!r}"
    return f"{_EPILOGUE}\n_hfsdk_harness({args})\n"


_SEQUENCE_TAGS: dict[str, Callable[[list[Any]], Any]] = {
    "list": list,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
}


def _decode(node: Any) -> Any:
    tag = node[0]
    if tag == "none":
        return None
    if tag == "int":
        return int(node[1], 16)
    if tag == "float":
        return float(node[1])
    if tag == "complex":
        real, imag = node[1]
        return complex(float(real), float(imag))
    if tag == "bytes":
        return bytes.fromhex(node[1])
    if tag in ("str", "bool"):
        value = node[1]
        if type(value) is not (str if tag == "str" else bool):
            raise ValueError(f"bad {tag}")
        return value
    if tag in _SEQUENCE_TAGS:
        return _SEQUENCE_TAGS[tag]([_decode(x) for x in node[1]])
    if tag == "dict":
        return {_decode(k): _decode(v) for k, v in node[1]}
    raise ValueError(f"unknown tag {tag!r}")


def _records(stdout: str, nonce: str) -> dict[int, dict[str, Any] | None]:
    """Case index -> its record (None: not a mapping, or duplicated: the case fails).

    Only lines with this run's ``nonce`` count: a program that prints records of its own
    does not know it.
    """
    prefix = f"{MARKER} {nonce} "
    seen: dict[int, dict[str, Any] | None] = {}
    twice: set[int] = set()
    for line in stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            index, body = line[len(prefix) :].split(" ", 1)
            data = json.loads(body)
            key = int(index)
        except ValueError:
            continue
        if key in seen:
            twice.add(key)
        seen[key] = data if isinstance(data, dict) else None
    for key in twice:
        seen[key] = None
    return seen


@attrs.frozen
class _Applied:
    """A leaf's value that the sandbox already passed through its ``via`` (see :class:`Operand`)."""

    value: Any


def _decode_leaf(leaf: Operand, node: Any) -> Any:
    if leaf.expr is None:
        return leaf.literal
    if leaf.via in _APPLYING and node[0] == "applied":
        return _Applied(_decode(node[1]))
    return _decode(node)


def _evaluate(node: Operand | Apply, leaves: Iterator[Any]) -> Any:
    """An operand tree's value: leaves from ``leaves`` (in order), functions applied here."""
    if isinstance(node, Operand):
        return next(leaves)
    args = [_evaluate(arg, leaves) for arg in node.args]
    if len(args) == 1 and isinstance(args[0], _Applied):  # only its sole argument's ``via``
        return args[0].value
    return _APPLY[node.fn](*args, **dict(node.kwargs))


def _holds(case: Case, record: dict[str, Any]) -> bool:
    if case.statement is not None:
        return record.get("ok") is True
    leaves = _case_leaves(case)
    tagged = record.get("values")
    if not isinstance(tagged, list) or len(tagged) != len(leaves):
        return False
    decoded = zip(leaves, tagged, strict=True)
    values = iter([_decode_leaf(leaf, node) for leaf, node in decoded])
    operands = [_evaluate(operand, values) for operand in case.operands]
    if not case.ops:
        return bool(operands[0])
    for op, left, right in zip(case.ops, operands, operands[1:], strict=False):
        result = _OPS[op](left, right)
        if type(result) is not bool or not result:
            return False
    return True


def judge(plan: AssertPlan, stdout: str) -> list[bool]:
    """Whether each case passed, from the sandbox's stdout (records this harness decodes)."""
    records = _records(stdout, plan.nonce)
    out = []
    for index, case in enumerate(plan.cases):
        record = records.get(index)
        try:
            ok = record is not None and _holds(case, record)
        except (ValueError, TypeError, KeyError, IndexError, ArithmeticError, RecursionError):
            ok = False  # a malformed record, or an operand that cannot be evaluated here
        out.append(ok)
    return out


def raised(plan: AssertPlan, stdout: str) -> dict[int, str]:
    """Case index -> the class name of the exception the case raised (cases that raised)."""
    records = _records(stdout, plan.nonce)
    return {
        index: record["raised"]
        for index, record in records.items()
        if record is not None and isinstance(record.get("raised"), str)
    }


__all__ = [
    "MARKER",
    "Apply",
    "AssertPlan",
    "BadTests",
    "Case",
    "judge",
    "plan_asserts",
    "plan_calls",
    "raised",
    "sandbox_program",
]
