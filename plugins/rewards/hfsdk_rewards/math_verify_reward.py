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
A worker still starting (importing sympy), or still on a sample cut short by that
deadline (not by ``sample_timeout_s``), when the time runs out is not killed: it goes on
and a later call uses it, so a slow start costs only the first call(s) rather than every
call paying it again; one not ready within ``_START_TIMEOUT_S`` of its start, or that
exits while starting, is an error.
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
    """The reward call's deadline came before the worker was ready or had answered; the
    worker is left running (starting, or on its sample) for a later call."""


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


class _TimedOut(_WorkerGone):
    """No reply within the limit; the worker is still running (:meth:`_Worker._read_line`)."""


class _WorkerExited(_WorkerGone):
    """The worker exited (a crash, out of memory, SIGXCPU); it has been reaped."""


class _Worker:
    """One child process running :mod:`._math_worker`, spoken to over pipes."""

    def __init__(self) -> None:
        """Start the process; :meth:`wait_ready` waits for it to have imported math-verify."""
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
        self.ready = False
        # Fixed at spawn: a start spread over several reward calls still ends here.
        self.start_end = time.monotonic() + _START_TIMEOUT_S
        # A sample cut short by a call's deadline, still computing: its (unwanted) reply
        # is due by then, else the sample was pathological and the worker is killed.
        self.busy_until: float | None = None

    def wait_ready(self, limit_s: float | None = None) -> None:
        """Return once the worker has started and finished any cut-short sample.

        :class:`_OutOfTime` when ``limit_s`` (the reward call's budget) ends first: the
        worker is left running, to be waited for again by a later call. An
        :class:`~hfsdk.HfsdkError` (the worker killed) when it exits while starting, or is
        not ready within ``_START_TIMEOUT_S`` of its spawn; :class:`_WorkerGone` (killed)
        when a cut-short sample runs past ``sample_timeout_s`` or the worker dies on it.
        """
        if self.busy_until is not None:
            wait = max(0.0, self.busy_until - time.monotonic())
            cut = limit_s is not None and limit_s < wait
            try:
                self._read_line(max(0.0, limit_s) if cut and limit_s is not None else wait)
            except _TimedOut:
                if cut:
                    raise _OutOfTime from None
                self.kill()  # the sample really ran past sample_timeout_s
                raise _WorkerGone from None
            except BaseException:
                self.kill()
                raise
            self.busy_until = None  # its reply (for a call that has returned) is dropped
        if self.ready:
            return
        wait = max(0.0, self.start_end - time.monotonic())
        cut = limit_s is not None and limit_s < wait
        try:
            answer = self._read_line(max(0.0, limit_s) if cut and limit_s is not None else wait)
        except _WorkerExited:
            raise HfsdkError(
                f"math_verify: its worker process ({sys.executable} {_WORKER_SCRIPT}) exited "
                f"with status {self.process.returncode} before it was ready; expected it to "
                "import math-verify and wait for samples; run `python -c 'import math_verify'` "
                "in this environment to see why (a crash, out of memory) and check that "
                "'math-verify' is installed"
            ) from None
        except _TimedOut:
            if cut:  # the reward call's deadline, not the worker: let it go on starting
                raise _OutOfTime from None
            self.kill()
            raise HfsdkError(
                f"math_verify: its worker process ({sys.executable} {_WORKER_SCRIPT}) did not "
                f"start within {_START_TIMEOUT_S:.0f} s; expected it to import math-verify; "
                "check that 'math-verify' is installed in this environment and that the "
                "machine is not overloaded"
            ) from None
        except BaseException:  # a deadline or Ctrl-C during the start: leave no child behind
            self.kill()
            raise
        if "error" in answer:  # the worker's import of math-verify failed (it has exited)
            self.kill()
            raise HfsdkError(
                f"math_verify: its worker process ({sys.executable}) could not import "
                f"math-verify ({answer['error']}); expected math-verify and its dependencies "
                "(sympy) installed in this environment; install them (pip install math-verify)"
            )
        if answer.get("ready") is not True:
            self.kill()
            raise HfsdkError(f"math_verify: its worker process answered {answer!r} at start")
        self.ready = True

    def ask(
        self, request: dict[str, Any], limit_s: float, full_s: float | None = None
    ) -> dict[str, Any]:
        """The reply to ``request``; :class:`_WorkerGone` (worker killed) past ``limit_s``.

        ``full_s``: the sample's own limit, when ``limit_s`` is the reward call's budget cut
        below it: past ``limit_s`` the worker is then left computing (:class:`_OutOfTime`)
        until ``full_s``, as killing it would make a later call pay a fresh start.
        """
        data = (json.dumps(request) + "\n").encode()
        asked_at = time.monotonic()
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            raise _WorkerGone from None
        try:
            return self._read_line(limit_s)
        except _TimedOut:
            if full_s is not None and full_s > limit_s:
                self.busy_until = asked_at + full_s
                raise _OutOfTime from None
            self.kill()  # mid-sample: sympy may compute for ever
            raise

    def _read_line(self, limit_s: float) -> dict[str, Any]:
        """One JSON line from the worker within ``limit_s`` seconds: :class:`_TimedOut` (the
        worker left running, a partial line kept) past it, :class:`_WorkerExited` (reaped)
        if it exits."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        poller = select.poll()  # not select.select: a busy process may have fds past 1024
        poller.register(fd, select.POLLIN)
        end = time.monotonic() + limit_s
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                raise _TimedOut
            chunk = os.read(fd, 65536)
            if not chunk:  # the worker died (SIGXCPU, out of memory, a crash)
                self.kill()
                raise _WorkerExited
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
    (concurrent callers each get their own), and gives it back when done. A worker whose
    start (or cut-short sample) outlasted its caller's budget waits in ``starting`` for the
    next caller."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        self.starting: list[_Worker] = []
        self.all: set[_Worker] = set()

    def take(self, budget_s: float | None = None) -> _Worker:
        """A ready worker: an idle one, else one still starting, else a new one.

        ``budget_s``: seconds the caller may wait for a start (``None``: no deadline).
        Past it :class:`_OutOfTime`, and the worker is kept in ``starting`` rather than
        killed, so its start is not paid again by every later call.
        """
        end = None if budget_s is None else time.monotonic() + budget_s
        while True:
            with self.lock:
                if self.idle:
                    return self.idle.pop()
                worker = self.starting.pop() if self.starting else None
            if worker is None:
                worker = _Worker()
                with self.lock:
                    self.all.add(worker)
            try:
                worker.wait_ready(None if end is None else end - time.monotonic())
            except _OutOfTime:
                self.park(worker)
                raise
            except _WorkerGone:  # its cut-short sample timed out: start a fresh one
                self.discard(worker)
                continue
            except BaseException:  # it exited or was killed (wait_ready reaped it)
                worker.kill()
                self.discard(worker)
                raise
            return worker

    def park(self, worker: _Worker) -> None:
        """Keep a worker still starting or on a cut-short sample for the next caller."""
        with self.lock:
            if worker in self.all:  # not closed meanwhile
                self.starting.append(worker)

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
            workers, self.all, self.idle, self.starting = list(self.all), set(), [], []
        for worker in workers:
            worker.kill()

    def forget_after_fork(self) -> None:
        """In a forked child the workers belong to the parent: drop them without killing."""
        self.lock = threading.Lock()
        self.idle, self.starting, self.all = [], [], set()


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


def _verdict(
    worker: _Worker, request: dict[str, Any], limit_s: float, full_s: float
) -> dict[str, Any] | None:
    """The worker's reply for one sample; ``None`` when it ran past ``limit_s`` (the worker
    is then dead and the caller needs a new one); :class:`_OutOfTime` when ``limit_s`` (the
    call's budget) is below ``full_s`` (``sample_timeout_s``) and ran out first."""
    try:
        reply = worker.ask(request, limit_s, full_s)
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
STARTING: dict[str, Any] = {"skipped": True, "starting": True}
"""A sample not asked: no worker was ready within the call's budget (one is still starting)."""


def _budget() -> float | None:
    """Seconds the next sample may use before the reward call must return (``None``: no
    deadline), keeping :data:`RESERVE_S`."""
    left = time_left()
    return None if left is None else left - RESERVE_S


def _score_all(
    responses: Sequence[str], golds: Sequence[list[str]], config: MathVerifyConfig
) -> list[dict[str, Any] | None]:
    """Each sample's reply from a worker of the pool (``None``: timed out; :data:`SKIPPED`
    or :data:`STARTING`: not asked).

    ``golds``: each sample's references (see :func:`.builtins.reference_texts`); the response
    is correct when it equals any of them. A sample without one is still asked with an empty
    reference, which never parses, so its ``found`` is the response's own.

    Samples are asked one after another inside one reward call, whose deadline
    (``reward.timeout_s``, :func:`.calling.time_left`) would stop the run if it fired: each
    pathological sample costs ``sample_timeout_s`` and a fresh worker. So a sample (and a
    worker's start) gets at most the time left to that deadline, less :data:`RESERVE_S`, and
    once none is left the remaining samples are not asked: they are :data:`SKIPPED`. When
    no worker is ready within that budget (a cold start slower than ``reward.timeout_s``)
    the samples are :data:`STARTING`, and the worker is kept starting for the next call.
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
                        worker = _POOL.take(budget)
                    except _OutOfTime:  # the worker goes on starting, for a later call
                        reply = STARTING
                        break
                    budget = _budget()
                    if budget is not None and budget <= 0:  # the start took the time left
                        reply = SKIPPED
                        break
                request = {
                    "gold": gold,
                    "answer": response,
                    "float_rounding": config.float_rounding,
                    "strict": config.strict,
                    "limit_s": config.sample_timeout_s,
                }
                limit = config.sample_timeout_s if budget is None else budget
                try:
                    one = _verdict(
                        worker,
                        request,
                        max(0.0, min(config.sample_timeout_s, limit)),
                        config.sample_timeout_s,
                    )
                except _OutOfTime:  # cut short by the deadline: it finishes for a later call
                    _POOL.park(worker)
                    worker, reply = None, SKIPPED
                    break
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
            if reply is SKIPPED or reply is STARTING:  # no time is left for the rest either
                replies.extend(reply for _ in range(len(responses) - len(replies)))
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
          config: MathVerifyConfig, starting: bool = False) -> None:  # fmt: skip
    """One warning per batch for timed-out samples and one for references that do not parse
    (``starting``: the skipped samples waited on a worker still starting)."""
    skipped = [i for i, row in enumerate(flags) if row["skipped"]]
    if skipped and starting:
        logger.warning(
            "math_verify: %d of %d samples were not scored because its worker process was "
            "still starting (importing math-verify) when the reward call's deadline "
            "(reward.timeout_s) came (first: sample %d); they scored incorrect_score and count "
            "in the 'timeout' and 'skipped' metrics; the worker goes on starting for the next "
            "calls; if every batch says this, raise reward.timeout_s",
            len(skipped), len(flags), skipped[0],
        )  # fmt: skip
    elif skipped:
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
    replies = _score_all(responses, golds, config)
    for reply in replies:
        skipped = reply is SKIPPED or reply is STARTING
        if reply is None or skipped:
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
                "timeout": float(reply is None or skipped),
                "skipped": float(skipped),
                "gold_unparsed": float(not gold_ok),
            }
        )
    _warn(responses, references, results, config, starting=any(r is STARTING for r in replies))
    return results
