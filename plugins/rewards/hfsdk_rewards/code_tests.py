"""The ``code_tests`` reward: run a response's code against test cases, in the sandbox.

The program is the response's last fenced Python block (```` ```python ````
or a bare ```` ``` ````). ``ground_truth`` (verl's ``reward_model.ground_truth``
column) is a JSON string, either ``{"inputs": [...], "outputs": [...]}``
(stdin/stdout pairs, the format of verl's and PRIME's code datasets: one
sandboxed run per case, which passes when it exits normally with the expected
output; the cases run in waves — wave k runs case k of every sample whose
earlier cases passed — so a sample stops at its first failing case and the
cases after it count as not passed), the same with ``"fn_name"`` (call-based
cases of APPS, PRIME and verl's ``prime_code``: each input is an argument list
for ``fn_name`` — a function of the program or a method of its ``class
Solution`` — and each output its return value, checked like an assert's value,
all in one sandboxed run per sample)
or ``{"asserts": ["assert f(1) == 2", ...]}`` (one sandboxed run per sample;
each assert is a case that :mod:`.code_harness` decides in this process, from
values the program's run serialised as plain data — never by the program's exit
status or its objects' ``__eq__``). The score is 1.0 when
every case passes, else 0.0. Each sample also reports the share of cases
passed and, as 0/1 flags, why it failed — ``no_code``, ``bad_tests``,
``wrong_answer``, ``early_exit`` (asserts left unreached), ``error``,
``timeout``, ``memory``, ``output_limit``, ``refused`` — so the batch means
read as the share of samples with each reason. Every case is checked unless
``max_cases`` is set (then ``cases_truncated`` flags a sample that had more).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

import attrs

from hfsdk import HfsdkError, help_field
from hfsdk_rewards.code_harness import (
    MARKER,
    AssertPlan,
    BadTests,
    judge,
    plan_asserts,
    plan_calls,
    raised,
    sandbox_program,
)
from hfsdk_sandbox import SandboxLimits, SandboxResult, run_many

logger = logging.getLogger(__name__)

_warned_bad_tests = False
"""Whether this process has warned about test cases that cannot be run (once: the same
column is bad in every batch, and a warning per step would drown the log)."""

REASONS = (
    "no_code",
    "bad_tests",
    "wrong_answer",
    "early_exit",
    "error",
    "timeout",
    "memory",
    "output_limit",
    "refused",
)
# A whole fenced block, opening fence to closing fence, with its tag (info string): blocks
# are paired first and only then chosen by tag, so the prose between a ```bash block and
# the ```python block after it is never taken for code. Both fences start a line (after
# optional indentation, as in a list item): backticks inside a sentence ("wrap your code
# in ``` fences", "a ```python``` block") are prose, and pairing them swallowed the real
# block's fence. \r?\n: a response with Windows line ends (CRLF) after the fence is code.
_FENCE = re.compile(r"^[ \t]*```([^\n`]*)\r?\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = frozenset({"", "python", "py", "python3"})


def _limits(value: Any) -> SandboxLimits:
    """Accept a YAML mapping for ``limits``."""
    if isinstance(value, SandboxLimits):
        return value
    if isinstance(value, dict):
        return SandboxLimits(**value)
    raise ValueError(f"'limits' is {value!r}; expected a mapping such as {{wall_s: 5}}")


@attrs.frozen(kw_only=True)
class CodeTestsConfig:
    """Settings of ``code_tests``: the column with the cases and the sandbox limits per case."""

    column: str = help_field(
        "Dataset column with the JSON test cases ({inputs, outputs} or {asserts}).",
        default="ground_truth",
    )
    limits: SandboxLimits = help_field(
        "Sandbox limits per sandbox run: one stdin/stdout case, or a whole asserts/fn_name "
        "sample, whose cases share one run (wall_s, cpu_s, memory_mb, output_bytes).",
        factory=SandboxLimits,
        converter=_limits,
    )
    concurrency: int | None = help_field(
        "Programs run at once; null: the cores this process may use.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
    )
    max_cases: int | None = help_field(
        "Test cases run per sample at most (the first ones); null: every case. When set "
        "and a sample has more, the 'cases_truncated' metric counts it.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
    )


def last_code_block(response: str) -> str | None:
    """The last fenced code block of ``response`` (Python or untagged), or ``None``.

    Blocks in another language (```` ```bash ````, ```` ```text ````) are passed over.
    """
    for match in reversed(list(_FENCE.finditer(response))):
        # The tag's first word decides (```python title="x" is Python), in any case.
        words = match.group(1).split()
        if (words[0].lower() if words else "") in _PYTHON_TAGS:
            return match.group(2)
    return None


Cases = list[tuple[str, str]] | AssertPlan
"""stdin/expected-stdout pairs, or the plan of an asserts sample."""


def parse_cases(raw: Any) -> tuple[Cases, str | None]:
    """The sample's cases and a problem, if any (then the cases are empty)."""
    try:
        spec = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
    except (TypeError, ValueError) as exc:
        return [], f"ground truth is not JSON ({exc})"
    if isinstance(spec, dict):
        # parquet stores a column mixing both forms as one struct: every row has every key,
        # the other form's set to None, so a None key counts as absent.
        spec = {key: value for key, value in spec.items() if value is not None}
    if isinstance(spec, dict) and "asserts" in spec:
        asserts = spec["asserts"]
        if isinstance(asserts, str):
            asserts = [asserts]
        if not isinstance(asserts, list) or not all(isinstance(a, str) for a in asserts):
            return [], "'asserts' must be a list of strings"
        try:
            return plan_asserts(asserts), None
        except BadTests as exc:
            return [], str(exc)
    if isinstance(spec, dict) and "inputs" in spec and "outputs" in spec:
        inputs, outputs = spec["inputs"], spec["outputs"]
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            return [], "'inputs' and 'outputs' must be lists"
        if len(inputs) != len(outputs):
            return [], f"{len(inputs)} inputs but {len(outputs)} outputs"
        if spec.get("fn_name"):  # call-based: argument lists and return values
            try:
                return plan_calls(spec["fn_name"], inputs, outputs), None
            except BadTests as exc:
                return [], str(exc)
        return [(str(i), str(o)) for i, o in zip(inputs, outputs, strict=True)], None
    return [], "expected {'inputs': [...], 'outputs': [...]} or {'asserts': [...]}"


def _same_output(got: str, expected: str) -> bool:
    """Equal up to trailing whitespace on each line and trailing blank lines."""

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.strip("\n").splitlines()]

    return lines(got) == lines(expected)


def _case_passed(result: SandboxResult, expected: str) -> bool:
    """Whether one stdin/stdout case's run exited normally with the expected output."""
    return result.ok and _same_output(result.stdout, expected)


def _io_verdicts(
    cases: list[tuple[str, str]], results: list[SandboxResult]
) -> tuple[list[bool], str | None]:
    """Each stdin/stdout case's pass, and the first failure reason (``None``: all passed).

    ``results`` may be shorter than ``cases`` (the sample stopped at its first failure):
    the cases not run count as not passed.
    """
    passed = [_case_passed(r, e) for (_, e), r in zip(cases, results, strict=False)]
    passed += [False] * (len(cases) - len(results))
    for result, ok in zip(results, passed, strict=False):
        if result.status != "ok":
            return passed, result.status
        if not ok:
            return passed, "wrong_answer"
    return passed, None


def _assert_verdicts(plan: AssertPlan, result: SandboxResult) -> tuple[list[bool], str | None]:
    """Each assert case's pass (decided here from the run's records) and the failure reason."""
    passed = judge(plan, result.stdout)
    if all(passed):
        return passed, None
    if result.status not in ("ok", "error"):
        return passed, result.status
    if result.status == "error" and "did not run to the end: SystemExit" in result.stderr:
        return passed, "early_exit"
    if result.status == "error" and not any(passed):
        return passed, "error"
    if result.status == "ok" and f"{MARKER} " not in result.stdout:
        return passed, "early_exit"
    return passed, _raised_reason(raised(plan, result.stdout).get(passed.index(False)))


def _raised_reason(name: str | None) -> str:
    """The reason of the first failed assert case, from the exception it raised (if any)."""
    if name == "MemoryError":
        return "memory"
    if name is None or name == "AssertionError":  # a failed assert is a wrong answer
        return "wrong_answer"
    return "error"


def _first_cases(cases: Cases, limit: int | None) -> tuple[Cases, bool]:
    """The first ``limit`` cases (``None``: all) and whether any were left out."""
    if limit is None:
        return cases, False
    if isinstance(cases, AssertPlan):
        cut = AssertPlan(
            cases=cases.cases[:limit],
            statements=tuple(s for s in cases.statements if s[0] < limit),
        )
        return cut, len(cases.cases) > limit
    return cases[:limit], len(cases) > limit


def _run_waves(
    programs: dict[int, str],
    io_samples: dict[int, tuple[str, list[tuple[str, str]]]],
    config: CodeTestsConfig,
) -> dict[int, list[SandboxResult]]:
    """Each sample's sandbox runs, by sample index.

    ``programs``: an asserts (or call-based) sample's one program, run in the first wave.
    ``io_samples``: a stdin/stdout sample's code and cases. Wave k runs case k of every
    sample whose cases 0..k-1 passed, through ``run_many``: one failing case already
    scores a sample 0, and running its other cases cost the whole call up to cases x
    ``wall_s`` (four endless samples of four cases overran ``reward.timeout_s``).
    """
    runs: dict[int, list[SandboxResult]] = {i: [] for i in (*programs, *io_samples)}
    wave = [(i, program, "") for i, program in programs.items()]
    for k in range(max((len(cases) for _, cases in io_samples.values()), default=0) + 1):
        wave += [
            (i, code, cases[k][0])
            for i, (code, cases) in io_samples.items()
            if k < len(cases)
            and len(runs[i]) == k  # ran every earlier wave, so cases 0..k-2 passed
            and (k == 0 or _case_passed(runs[i][-1], cases[k - 1][1]))
        ]
        if not wave:
            break
        jobs = [(program, stdin) for _, program, stdin in wave]
        results = run_many(jobs, limits=config.limits, concurrency=config.concurrency)
        for (i, _, _), result in zip(wave, results, strict=True):
            runs[i].append(result)
        wave = []
    return runs


def _warn_bad_tests(problems: dict[int, str], batch_size: int, column: str) -> None:
    """Say once per process why samples score 0.0 as ``bad_tests`` (else only a metric
    would, and never which sample or what is wrong with its cases)."""
    global _warned_bad_tests
    if _warned_bad_tests:
        return
    _warned_bad_tests = True
    first = min(problems)
    logger.warning(
        "code_tests: %d of %d samples have test cases in column %r that cannot be run, so "
        "they score 0.0 (metric bad_tests; first: sample %d: %s); fix the test cases (this "
        "warning is given once per process)",
        len(problems), batch_size, column, first, problems[first],
    )  # fmt: skip


def code_tests(
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    config: CodeTestsConfig | None = None,
    **columns: Sequence[Any],
) -> list[dict[str, float]]:
    """Score 1.0 for a response whose last code block passes every test case, else 0.0."""
    config = config or CodeTestsConfig()
    if config.column not in columns:
        raise HfsdkError(
            f"code_tests needs the dataset column {config.column!r} with JSON test cases; "
            f"columns available: {sorted(columns) or 'none'} (set column, or add "
            "reward_model.ground_truth to the data)"
        )
    plans: list[tuple[Cases, str | None]] = []
    truncated: list[bool] = []
    programs: dict[int, str] = {}
    io_samples: dict[int, tuple[str, list[tuple[str, str]]]] = {}
    problems: dict[int, str] = {}
    for index, (response, raw) in enumerate(zip(responses, columns[config.column], strict=True)):
        code = last_code_block(response)
        cases, problem = parse_cases(raw)
        if problem is not None or not cases:
            problems[index] = problem or "no test cases"
        cases, cut = _first_cases(cases, config.max_cases)
        truncated.append(cut)
        if code is None:
            plans.append(([], "no_code"))
            continue
        if problem is not None or not cases:
            plans.append(([], "bad_tests"))
            continue
        if isinstance(cases, AssertPlan):
            programs[index] = sandbox_program(code, cases)
        else:
            io_samples[index] = (code, cases)
        plans.append((cases, None))
    if problems:
        _warn_bad_tests(problems, len(plans), config.column)
    runs = _run_waves(programs, io_samples, config)
    out = []
    for index, ((cases, early), cut) in enumerate(zip(plans, truncated, strict=True)):
        if early is not None:
            passed, reason = [], early
        elif isinstance(cases, AssertPlan):
            passed, reason = _assert_verdicts(cases, runs[index][0])
        else:
            passed, reason = _io_verdicts(cases, runs[index])
        row = {"score": 1.0 if reason is None else 0.0}
        row["cases_passed"] = sum(passed) / len(passed) if passed else 0.0
        row.update({name: float(reason == name) for name in REASONS})
        if config.max_cases is not None:  # the score covers only the first max_cases cases
            row["cases_truncated"] = float(cut)
        out.append(row)
    return out
