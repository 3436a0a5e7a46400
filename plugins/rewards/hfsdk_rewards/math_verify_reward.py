"""``math_verify``: MATH-style answers compared as mathematics, by Hugging Face's ``math-verify``.

The response's answer (``\\boxed{...}`` first, else the last LaTeX or plain
expression) and the reference are parsed into sympy and compared as values:
``\\frac12`` equals ``0.5`` and ``1/2``, ``\\{1,2\\}`` is a set, ``\\sqrt{2}``
stays exact.

Each sample is parsed and verified in a child process (:mod:`._math_worker`),
one per concurrent caller, started once and reused. sympy can compute inside C
for ever (``\\boxed{9^{9^{9^{9}}}}``), where neither math-verify's ``SIGALRM``
timeout nor hfsdk's reward deadline (both land between Python bytecodes) can
stop it; a process can be killed. A sample past ``sample_timeout_s`` has its
worker killed (a fresh one serves the next sample), scores ``incorrect_score``
and is counted by the ``timeout`` metric, as math-verify's own timeout does in
verl and TRL, so one pathological answer does not stop the run. Nor do many: once the
reward call's own deadline (``reward.timeout_s``) is about to run out, the samples left
are not asked and score as timeouts (the ``skipped`` metric), so the call returns in time.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import numbers
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HfsdkError, help_field
from hfsdk_rewards.builtins import reference_texts
from hfsdk_rewards.calling import time_left

logger = logging.getLogger(__name__)

_WORKER_SCRIPT = Path(__file__).with_name("_math_worker.py")
_START_TIMEOUT_S = 120.0
"""How long a worker may take to import math-verify (sympy) before it is given up on."""
RESERVE_S = 0.5
"""Seconds of the reward call's deadline (``reward.timeout_s``) kept for returning: samples
are asked only while more than this is left."""


class _OutOfTime(Exception):
    """The reward call's deadline left no time to start a worker."""


@attrs.frozen(kw_only=True)
class MathVerifyConfig:
    """Settings of ``math_verify``."""

    answer_column: str = help_field(
        "Dataset column holding the reference answer (LaTeX or plain: '\\frac12', '0.5').",
        default="answer",
    )
    float_rounding: int = help_field(
        "Decimal places numbers are rounded to before they are compared.",
        default=6,
        validator=attrs.validators.ge(0),
    )
    strict: bool = help_field(
        "math-verify's strict mode: variable names in relations must match (y=1 is not "
        "x=1); x=1 against 1 scores correct either way.",
        default=True,
    )
    sample_timeout_s: float = help_field(
        "Seconds one sample's parse and verify may take (wall clock); past it the sample "
        "scores incorrect_score, counts in the 'timeout' metric, and its worker process is "
        "killed and replaced.",
        default=5.0,
        validator=attrs.validators.gt(0),
    )
    correct_score: float = help_field("Score of a correct answer.", default=1.0)
    incorrect_score: float = help_field("Score of a wrong answer.", default=0.0)
    no_answer_score: float = help_field(
        "Score when no answer can be parsed from the response.", default=0.0
    )


class _WorkerGone(Exception):
    """The worker process ran past the sample's limit or died while serving it."""


class _Worker:
    """One child process running :mod:`._math_worker`, spoken to over pipes."""

    def __init__(self, start_limit_s: float = _START_TIMEOUT_S) -> None:
        # subprocess (fork+exec) rather than multiprocessing: nothing of this
        # multi-threaded process is inherited and the caller's __main__ is not re-run.
        bootstrap = f"import runpy; runpy.run_path({str(_WORKER_SCRIPT)!r}, run_name='__main__')"
        self.process = subprocess.Popen(
            [sys.executable, "-c", bootstrap],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        self._buffer = b""
        try:
            ready = self._read_line(min(start_limit_s, _START_TIMEOUT_S))
        except _WorkerGone:
            if start_limit_s < _START_TIMEOUT_S:  # cut short by the reward call's deadline
                raise _OutOfTime from None
            raise HfsdkError(
                f"math_verify: its worker process ({sys.executable} {_WORKER_SCRIPT}) did not "
                f"start within {_START_TIMEOUT_S:.0f} s or exited; expected it to import "
                "math-verify; check that 'math-verify' is installed in this environment"
            ) from None  # (_read_line killed and reaped it)
        except BaseException:  # a deadline or Ctrl-C during the start: leave no child behind
            self.kill()
            raise
        if "error" in ready:  # the worker's import of math-verify failed (it has exited)
            self.kill()
            raise HfsdkError(
                f"math_verify: its worker process ({sys.executable}) could not import "
                f"math-verify ({ready['error']}); expected math-verify and its dependencies "
                "(sympy) installed in this environment; install them (pip install math-verify)"
            )
        if ready.get("ready") is not True:
            self.kill()
            raise HfsdkError(f"math_verify: its worker process answered {ready!r} at start")

    def ask(self, request: dict[str, Any], limit_s: float) -> dict[str, Any]:
        """The reply to ``request``; :class:`_WorkerGone` (worker killed) past ``limit_s``."""
        data = (json.dumps(request) + "\n").encode()
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            raise _WorkerGone from None
        return self._read_line(limit_s)

    def _read_line(self, limit_s: float) -> dict[str, Any]:
        """One JSON line from the worker within ``limit_s`` seconds (else kill it)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        poller = select.poll()  # not select.select: a busy process may have fds past 1024
        poller.register(fd, select.POLLIN)
        end = time.monotonic() + limit_s
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                self.kill()
                raise _WorkerGone
            chunk = os.read(fd, 65536)
            if not chunk:  # the worker died (SIGXCPU, out of memory, a crash)
                self.kill()
                raise _WorkerGone
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        """End the process now and reap it (no zombie is left)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class _Pool:
    """Idle workers of this process; a caller takes one, or starts one when none is idle
    (concurrent callers each get their own), and gives it back when done."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        self.all: set[_Worker] = set()

    def take(self, start_limit_s: float = _START_TIMEOUT_S) -> _Worker:
        """An idle worker, or a new one (:class:`_OutOfTime` if it does not start within
        ``start_limit_s``, when that is below the usual start limit)."""
        with self.lock:
            if self.idle:
                return self.idle.pop()
        worker = _Worker(start_limit_s)
        with self.lock:
            self.all.add(worker)
        return worker

    def give_back(self, worker: _Worker) -> None:
        """Keep a worker that is still alive for the next caller."""
        with self.lock:
            if worker.process.poll() is None and worker in self.all:
                self.idle.append(worker)
            else:
                self.all.discard(worker)

    def discard(self, worker: _Worker) -> None:
        """Forget a worker that was killed."""
        with self.lock:
            self.all.discard(worker)

    def close(self) -> None:
        """Kill every worker, busy ones included (at exit, or from :func:`close_workers`)."""
        with self.lock:
            workers, self.all, self.idle = list(self.all), set(), []
        for worker in workers:
            worker.kill()

    def forget_after_fork(self) -> None:
        """In a forked child the workers belong to the parent: drop them without killing."""
        self.lock = threading.Lock()
        self.idle, self.all = [], set()


_POOL = _Pool()
atexit.register(_POOL.close)
os.register_at_fork(after_in_child=_POOL.forget_after_fork)


def close_workers() -> None:
    """Kill this process's ``math_verify`` workers (they also end at exit); the next call
    starts a fresh one."""
    _POOL.close()


_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")


def _reference(text: str) -> str:
    """A bare reference (``\\frac12``, ``0.5``, ``\\$18.90``) boxed, so math-verify reads it
    as the answer; one that already has ``$...$`` math or a ``\\boxed`` is kept as it is."""
    if _UNESCAPED_DOLLAR.search(text) or "\\boxed" in text:
        return text
    return f"\\boxed{{{text}}}"


def _positional(reference: Any) -> Any:
    """A float reference (or each one of a list) written in positional notation.

    ``str(1e-05)`` is ``'1e-05'``, which math-verify does not read as a number, so such a
    reference never scored; ``0.00001`` is the same value written out. Floats written
    without an exponent (``0.5``, ``3.0``) and text are left as they are.
    """
    if isinstance(reference, (list, tuple)):
        return [_positional(value) for value in reference]
    if not isinstance(reference, numbers.Real) or isinstance(reference, numbers.Integral):
        return reference
    text = str(reference)
    if "e" not in text.lower() or text.lower() in ("inf", "-inf", "nan"):
        return reference
    try:
        return format(Decimal(text), "f")
    except InvalidOperation:  # a number type whose str() is no decimal: left to math-verify
        return reference


def _verdict(worker: _Worker, request: dict[str, Any], limit_s: float) -> dict[str, Any] | None:
    """The worker's reply for one sample; ``None`` when it ran past ``limit_s`` (the worker
    is then dead and the caller needs a new one)."""
    try:
        reply = worker.ask(request, limit_s)
    except _WorkerGone:
        return None
    if "error" in reply:
        raise HfsdkError(
            f"math_verify: math-verify raised {reply['error']} on the response "
            f"{request['answer'][:80]!r}; expected it to parse or return no answer"
        )
    return reply


SKIPPED: dict[str, Any] = {"skipped": True}
"""A sample not asked: the reward call's deadline was too close (see :func:`_score_all`)."""


def _budget() -> float | None:
    """Seconds the next sample may use before the reward call must return (``None``: no
    deadline), keeping :data:`RESERVE_S`."""
    left = time_left()
    return None if left is None else left - RESERVE_S


def _score_all(
    responses: Sequence[str], golds: Sequence[list[str]], config: MathVerifyConfig
) -> list[dict[str, Any] | None]:
    """Each sample's reply from a worker of the pool (``None``: timed out; :data:`SKIPPED`:
    not asked).

    ``golds``: each sample's references (see :func:`.builtins.reference_texts`); the response
    is correct when it equals any of them. A sample without one is still asked with an empty
    reference, which never parses, so its ``found`` is the response's own.

    Samples are asked one after another inside one reward call, whose deadline
    (``reward.timeout_s``, :func:`.calling.time_left`) would stop the run if it fired: each
    pathological sample costs ``sample_timeout_s`` and a fresh worker. So a sample (and a
    worker's start) gets at most the time left to that deadline, less :data:`RESERVE_S`, and
    once none is left the remaining samples are not asked: they are :data:`SKIPPED`.
    """
    replies: list[dict[str, Any] | None] = []
    worker: _Worker | None = None
    try:
        for response, texts in zip(responses, golds, strict=True):
            reply: dict[str, Any] | None = {"gold_ok": False, "found": False, "correct": False}
            for gold in [_reference(t) for t in texts] or [""]:
                budget = _budget()
                if budget is not None and budget <= 0:
                    reply = SKIPPED
                    break
                if worker is None:
                    try:
                        worker = _POOL.take(_START_TIMEOUT_S if budget is None else budget)
                    except _OutOfTime:
                        reply = SKIPPED
                        break
                    budget = _budget()
                request = {
                    "gold": gold,
                    "answer": response,
                    "float_rounding": config.float_rounding,
                    "strict": config.strict,
                    "limit_s": config.sample_timeout_s,
                }
                limit = config.sample_timeout_s if budget is None else budget
                one = _verdict(worker, request, max(0.0, min(config.sample_timeout_s, limit)))
                if one is None:  # timed out: the sample scores as a timeout
                    _POOL.discard(worker)
                    worker, reply = None, None
                    break
                assert reply is not None
                reply = {
                    "gold_ok": reply["gold_ok"] or one["gold_ok"],
                    "found": one["found"],
                    "correct": one["correct"],
                }
                if one["correct"]:
                    break
            replies.append(reply)
            if reply is SKIPPED:  # no time is left for the rest either
                replies.extend(SKIPPED for _ in range(len(responses) - len(replies)))
                break
    except BaseException:
        # Interrupted mid-request (hfsdk's deadline, Ctrl-C): the worker's state is unknown.
        if worker is not None:
            worker.kill()
            _POOL.discard(worker)
        raise
    if worker is not None:
        _POOL.give_back(worker)
    return replies


def _warn(responses: Sequence[str], references: Sequence[Any], flags: list[dict[str, float]],
          config: MathVerifyConfig) -> None:  # fmt: skip
    """One warning per batch for timed-out samples and one for references that do not parse."""
    skipped = [i for i, row in enumerate(flags) if row["skipped"]]
    if skipped:
        logger.warning(
            "math_verify: %d of %d samples were not scored because the reward call's deadline "
            "(reward.timeout_s) was too close after the samples before them (first: sample %d); "
            "they scored incorrect_score and count in the 'timeout' and 'skipped' metrics; "
            "raise reward.timeout_s or lower sample_timeout_s",
            len(skipped), len(flags), skipped[0],
        )  # fmt: skip
    timed_out = [i for i, row in enumerate(flags) if row["timeout"] and not row["skipped"]]
    if timed_out:
        first = timed_out[0]
        logger.warning(
            "math_verify: %d of %d samples ran past sample_timeout_s=%g and scored "
            "incorrect_score (first: sample %d, response %r)",
            len(timed_out), len(flags), config.sample_timeout_s, first,
            responses[first][-80:],
        )  # fmt: skip
    unparsed = [i for i, row in enumerate(flags) if row["gold_unparsed"]]
    if unparsed:
        first = unparsed[0]
        logger.warning(
            "math_verify: %d of %d reference answers (column %r) are missing or do not parse, "
            "so those samples cannot score correct_score (first: sample %d, reference %s); fix "
            "the references or use exact_match",
            len(unparsed), len(flags), config.answer_column, first, repr(references[first])[:80],
        )  # fmt: skip


def math_verify(
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    config: MathVerifyConfig | None = None,
    **columns: Sequence[Any],
) -> list[dict[str, float]]:
    """Score 1 (``correct_score``) when the response's answer equals the reference mathematically.

    The reference is text or a number, or a list of them of which any one counts as
    correct. Also reports, as shares of the batch, ``answer_found`` (an answer was parsed
    from the response), ``timeout`` (the sample ran past ``sample_timeout_s``, or was
    skipped), ``skipped`` (not scored: ``reward.timeout_s`` was about to run out, see
    :func:`_score_all`) and ``gold_unparsed`` (the reference is missing, null or an empty
    list, or did not parse).
    """
    config = config or MathVerifyConfig()
    if config.answer_column not in columns:
        raise HfsdkError(
            f"math_verify needs the dataset column {config.answer_column!r} with the reference "
            f"answers; columns available: {sorted(columns) or 'none'} (set answer_column)"
        )
    references = columns[config.answer_column]
    golds = [
        reference_texts(
            _positional(r), function="math_verify", column=config.answer_column, index=i
        )
        for i, r in enumerate(references)
    ]
    results = []
    for reply in _score_all(responses, golds, config):
        if reply is None or reply is SKIPPED:
            score, found, gold_ok = config.incorrect_score, False, True
        else:
            found, gold_ok = reply["found"], reply["gold_ok"]
            if not found:
                score = config.no_answer_score
            elif reply["correct"]:
                score = config.correct_score
            else:
                score = config.incorrect_score
        results.append(
            {
                "score": score,
                "answer_found": float(found),
                "timeout": float(reply is None or reply is SKIPPED),
                "skipped": float(reply is SKIPPED),
                "gold_unparsed": float(not gold_ok),
            }
        )
    _warn(responses, references, results, config)
    return results
