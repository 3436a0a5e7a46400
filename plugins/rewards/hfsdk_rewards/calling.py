"""Calling reward functions on a batch and checking what they return."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import inspect
import math
import numbers
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HIDDEN_COLUMNS, DeadlineExceeded, HfsdkError, deadline
from hfsdk_rewards.errors import RewardFunctionError

Columns = Mapping[str, Sequence[Any]]


@attrs.frozen(kw_only=True)
class RewardCall:
    """A reward function bound to its settings: ``fn(prompts, responses, **columns, **kwargs)``."""

    label: str
    fn: Callable[..., Any]
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)
    style: str = "hfsdk"
    """The convention the user's function follows (``hfsdk_rewards.call_styles``)."""
    check: Callable[[Any, Any], str | None] | None = None
    """Its call style's signature check (``RewardCallStyle.check``); ``None`` for hfsdk's."""
    needs: tuple[str, ...] = ()
    """Dataset columns it reads whatever its signature says (a registered function's
    ``columns(config)``), e.g. ``exact_match``'s ``answer_column``."""
    metric: str | None = None
    """The name its metrics are logged under (``None``: :attr:`label`)."""

    def arguments(self, columns: Columns) -> dict[str, Any]:
        """The keyword arguments for one call: the columns the function accepts plus settings."""
        clash = sorted(set(columns) & set(self.kwargs))
        if clash:
            raise HfsdkError(
                f"reward function {self.label!r}: setting(s) {clash} have the same name as dataset "
                "columns; rename the setting or the column"
            )
        parameters = inspect.signature(self.fn).parameters
        named = set(parameters)
        # Hidden columns (chat messages, rendered prompt) go only to functions that name them.
        visible = {k: v for k, v in columns.items() if k not in HIDDEN_COLUMNS or k in named}
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return {**visible, **self.kwargs}
        # Functions without **kwargs get only the columns they name.
        return {**{k: v for k, v in visible.items() if k in named}, **self.kwargs}


@attrs.frozen(kw_only=True)
class RewardResult:
    """What one reward function gave for a batch: scores and mean extra metrics."""

    scores: list[float]
    metrics: dict[str, float]


_CALL_END: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "hfsdk_reward_call_end", default=None
)
"""When the reward call now running in this context reaches its deadline (monotonic)."""


def time_left() -> float | None:
    """Seconds until the deadline of the reward call now running (``reward.timeout_s``), or
    ``None`` when it has none (or the function was called directly, not by hfsdk).

    A function that scores sample by sample and can give up on some (``math_verify``)
    reads it to return in time instead of being interrupted and stopping the run.
    """
    end = _CALL_END.get()
    return None if end is None else end - time.monotonic()


@contextlib.contextmanager
def _call_deadline(seconds: float | None, message: str) -> Iterator[None]:
    """:func:`hfsdk.deadline`, with its end also told to :func:`time_left`."""
    end = None if seconds is None or not seconds > 0 else time.monotonic() + seconds
    token = _CALL_END.set(end)
    try:
        with deadline(seconds, message, log_stack=False):
            yield
    finally:
        _CALL_END.reset(token)


def run_awaitable(awaitable: Awaitable[Any]) -> Any:
    """Run a coroutine to completion, also from inside a running event loop (Ray async actors).

    Inside a running loop the coroutine runs on a helper thread, waited for in short joins:
    a deadline of the caller's (``reward.timeout_s``) lands between them even when the
    coroutine blocks its own loop. A thread cannot be killed, so such a helper is then
    abandoned (a daemon, still running) and the exception carries its frames
    (``helper_frames``) to say where it was.
    """

    async def wrapper() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrapper())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(wrapper())
        except BaseException as exc:  # re-raised in the calling thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="hfsdk-reward-async", daemon=True)
    thread.start()
    try:
        while thread.is_alive():  # not one join(): the deadline's exception could not land
            thread.join(0.1)
    except BaseException as exc:
        frame = sys._current_frames().get(thread.ident or -1)
        exc.helper_frames = _frame_stack(frame)  # type: ignore[attr-defined]
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _frame_stack(frame: Any) -> list[Any]:
    """``frame`` and its callers, outermost first."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _slice(columns: Columns, index: int) -> dict[str, Sequence[Any]]:
    return {k: v[index : index + 1] for k, v in columns.items()}


def invoke(
    call: RewardCall, prompts: Sequence[str], responses: Sequence[str], columns: Columns
) -> Any:
    """Call the function (its result may be awaitable) on copies of the columns it takes
    (:func:`call_arguments`)."""
    return call_with(call, prompts, responses, call_arguments(call, columns))


def call_arguments(call: RewardCall, columns: Columns) -> dict[str, Any]:
    """The keyword arguments of one call: the columns the function takes, each copied row
    by row, and its settings.

    A function that sorts or edits a list in place, or a row's own keys (pops a key of an
    ``extra_info`` dict), must not change what the next function or the caller sees;
    objects nested inside a row are shared. Only the columns passed are copied, and only
    one level deep: a deep copy of every column (2048 agent trajectories) took a second
    per function per step, inside the function's deadline. Called before the deadline
    starts.
    """
    passed = call.arguments(columns)
    # A setting never shares a column's name (arguments refuses that): the rest are settings.
    return {k: _copy(v) if k in columns else v for k, v in passed.items()}


def call_with(
    call: RewardCall,
    prompts: Sequence[str],
    responses: Sequence[str],
    arguments: Mapping[str, Any],
) -> Any:
    """Call the function with keyword ``arguments`` from :func:`call_arguments`."""
    try:
        return call.fn(list(prompts), list(responses), **arguments)
    except SystemExit as exc:  # would end the run quietly, with its status
        raise _exited(exc) from None


def _copy(column: Any) -> Any:
    """``column`` with each row a shallow copy, of the same type: a list, a tuple or a numpy
    array (a 1-D one of objects row by row); anything else as it is."""
    if isinstance(column, list | tuple):
        rows = [_copy_row(row) for row in column]
        return rows if isinstance(column, list) else tuple(rows)
    if hasattr(column, "dtype") and hasattr(column, "copy"):  # numpy, without importing it
        copied = column.copy()
        if copied.dtype == object and copied.ndim == 1:
            for index, row in enumerate(column):
                copied[index] = _copy_row(row)
        return copied
    return column


def _copy_row(row: Any) -> Any:
    """A shallow copy of ``row``; the row itself when it cannot be copied (a lock, an open
    file: nothing a function could edit by accident either)."""
    try:
        return copy.copy(row)
    except Exception:
        return row


def _exited(exc: SystemExit) -> HfsdkError:
    return HfsdkError(f"called sys.exit({exc.code!r}); return a score per sample instead")


DEFAULT_TIMEOUT_S = 300.0
"""A scoring function's deadline when the caller gives none (``reward.timeout_s``)."""
LOCATE_SAMPLES = 64
"""The most samples a failed batch is retried one by one on, to name the one that fails."""


def locate_failure(
    call: RewardCall,
    prompts: Sequence[str],
    responses: Sequence[str],
    columns: Columns,
    error: BaseException,
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    timeout_key: str = "reward.timeout_s",
) -> RewardFunctionError:
    """Turn a batch call's exception into an error naming the first sample that fails alone.

    The first :data:`LOCATE_SAMPLES` samples are tried, all of them within ``timeout_s``:
    a function that raises on the batch and hangs on one sample must not hang the run.
    """
    if isinstance(error, HfsdkError):
        # A clear message from the function itself (e.g. a missing column): keep it.
        return RewardFunctionError(f"reward function {call.label!r}: {error}")
    tried = min(len(prompts), LOCATE_SAMPLES)
    limit = timeout_s if timeout_s and timeout_s > 0 else None
    index = 0
    try:
        with _call_deadline(limit, f"reward function {call.label!r}"):
            for index in range(tried):
                try:
                    result = invoke(
                        call,
                        prompts[index : index + 1],
                        responses[index : index + 1],
                        _slice(columns, index),
                    )
                    if inspect.isawaitable(result):
                        run_awaitable(result)
                except Exception as exc:
                    return RewardFunctionError(
                        f"reward function {call.label!r} raised {type(exc).__name__}: {exc} on "
                        f"sample {index} (response {responses[index][:80]!r}); fix the function "
                        "or the data"
                    )
    except DeadlineExceeded:
        return RewardFunctionError(
            f"reward function {call.label!r} raised {type(error).__name__}: {error} on the batch "
            f"of {len(prompts)} samples, then did not return within {limit:g} s ({timeout_key}) "
            f"on sample {index} alone; fix the function"
        )
    return RewardFunctionError(
        f"reward function {call.label!r} raised {type(error).__name__}: {error} on the batch of "
        f"{len(prompts)} samples, though none of the first {tried} fails alone; fix the function"
    )


def _as_list(label: str, result: Any, batch_size: int) -> list[Any]:
    if hasattr(result, "tolist") and not isinstance(result, list):
        result = result.tolist()  # numpy arrays and torch tensors
    if isinstance(result, str | bytes | Mapping) or not isinstance(result, Sequence):
        raise RewardFunctionError(
            f"reward function {label!r} returned a {type(result).__name__}; expected a list with "
            f"one float (or one dict with a 'score' key) per sample, {batch_size} in all"
        )
    if len(result) != batch_size:
        raise RewardFunctionError(
            f"reward function {label!r} returned {len(result)} results for {batch_size} samples; "
            "expected exactly one per sample, in the order of the responses"
        )
    return list(result)


def _number(value: Any) -> float | None:
    # A bool is no score (True would count as 1.0); numpy's bool is no numbers.Real.
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an int past a float's range: as non-finite as inf
            return math.inf
    return None


def _is_bool(value: Any) -> bool:
    # A numpy bool can only come from an imported numpy; no import needed to recognise it.
    numpy = sys.modules.get("numpy")
    return isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_))


def _extra(value: Any) -> float | None:
    # Unlike a score, a bool extra (verl's ``acc``) is logged as 1.0/0.0: its mean is a rate.
    return float(value) if _is_bool(value) else _number(value)


def check_result(label: str, result: Any, batch_size: int) -> RewardResult:
    """Validate a function's return value: one finite score per sample, extras as metrics.

    Each extra metric is the mean over the samples that return its key (not the whole
    batch); non-finite values are left out.
    """
    scores: list[float] = []
    extras: dict[str, list[float]] = {}
    for index, item in enumerate(_as_list(label, result, batch_size)):
        if isinstance(item, Mapping):
            if "score" not in item:
                raise RewardFunctionError(
                    f"reward function {label!r} returned a dict without 'score' for sample {index} "
                    f"(keys: {sorted(map(str, item))}); put the sample's reward under 'score'"
                )
            score = _number(item["score"])
            for key, value in item.items():
                number = _extra(value)
                # Only numbers and bools can be logged; strings (the extracted answer) are skipped.
                if key != "score" and number is not None and math.isfinite(number):
                    extras.setdefault(str(key), []).append(number)
        else:
            score = _number(item)
        if score is None:
            shown = item["score"] if isinstance(item, Mapping) else item
            raise RewardFunctionError(
                f"reward function {label!r} returned {shown!r} ({type(shown).__name__}) as the "
                f"score of sample {index}; expected a finite float"
            )
        if not math.isfinite(score):
            raise RewardFunctionError(
                f"reward function {label!r} returned the non-finite score {score} for sample "
                f"{index}; return a finite float (e.g. 0.0 for an unparsable response)"
            )
        scores.append(score)
    metrics = {key: sum(values) / len(values) for key, values in extras.items()}
    return RewardResult(scores=scores, metrics=metrics)


ASYNC_SLACK_S = 5.0
"""Extra time before async functions that block their event loop are interrupted."""


def _sample_of(frames: Sequence[Any], responses: Sequence[str]) -> int | None:
    """The sample a hung function was scoring: a response text held by one of its frames.

    Per-sample scorers hold the response as an argument or a loop variable; the
    innermost frame holding one names the sample (``None``: none does).
    """
    positions = {text: index for index, text in reversed(list(enumerate(responses)))}
    for frame in reversed(frames):
        for value in frame.f_locals.values():
            if isinstance(value, str) and value in positions:
                return positions[value]
    return None


def _tb_frames(exc: BaseException) -> list[Any]:
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _coroutine_frames(coro: Any) -> list[Any]:
    """The frames of a suspended coroutine and of what it awaits, outermost first."""
    frames = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def timeout_error(
    label: str,
    timeout_s: float,
    key: str,
    responses: Sequence[str],
    frames: Sequence[Any],
) -> RewardFunctionError:
    """The one line for a scoring function past its deadline; ``frames``: where it was."""
    sample = _sample_of(frames, responses)
    if sample is not None:
        where = f"on sample {sample} (response {responses[sample][:80]!r})"
    else:
        where = f"on a batch of {len(responses)} samples"
    own = [f for f in frames if not _machinery(f.f_code.co_filename)]
    if own:
        inner = own[-1]
        where += (
            f", at {Path(inner.f_code.co_filename).name}:{inner.f_lineno} in {inner.f_code.co_name}"
        )
    return RewardFunctionError(
        f"reward function {label!r} did not return within {timeout_s:g} s ({key}) {where}; "
        f"fix the function (a hang, a slow remote call) or raise {key}"
    )


def _machinery(filename: str) -> bool:
    """Frames of this module, the deadline, threading and asyncio: not where the user's
    function was."""
    own = (__file__, inspect.getfile(DeadlineExceeded), contextlib.__file__, threading.__file__)
    return filename in own or filename.startswith(str(Path(asyncio.__file__).parent))


def call_reward_functions(
    calls: Sequence[RewardCall],
    prompts: Sequence[str],
    responses: Sequence[str],
    columns: Columns,
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    timeout_key: str = "reward.timeout_s",
) -> list[RewardResult]:
    """Call every function on the batch (async ones concurrently) and validate the results.

    Each call gets ``timeout_s`` seconds (``None`` or 0: no limit): a sync
    function past it is interrupted where it hangs, an async one cancelled, and
    the run stops with a :class:`RewardFunctionError` naming the function and
    the sample it was scoring (``timeout_key`` names the setting).
    """
    pending: dict[int, Awaitable[Any]] = {}
    outcomes: dict[int, Any] = {}
    failures: dict[int, BaseException] = {}
    limit = timeout_s if timeout_s and timeout_s > 0 else None
    for position, call in enumerate(calls):
        try:
            # Copied before the deadline starts: the copies are not the function's time.
            arguments = call_arguments(call, columns)
            with _call_deadline(limit, f"reward function {call.label!r}"):
                result = call_with(call, prompts, responses, arguments)
        except DeadlineExceeded as exc:
            frames = _tb_frames(exc)
            raise timeout_error(call.label, limit or 0.0, timeout_key, responses, frames) from None
        except Exception as exc:
            failures[position] = exc
            continue
        if inspect.isawaitable(result):
            pending[position] = result
        else:
            outcomes[position] = result
    if pending:
        for position, result in zip(
            pending, _await_all(calls, pending, responses, limit, timeout_key), strict=True
        ):
            if isinstance(result, Exception):
                failures[position] = result
            elif isinstance(result, BaseException):
                raise result
            else:
                outcomes[position] = result
    if failures:
        position = min(failures)
        raise locate_failure(
            calls[position], prompts, responses, columns, failures[position],
            timeout_s=timeout_s, timeout_key=timeout_key,
        ) from failures[position]  # fmt: skip
    return [check_result(call.label, outcomes[i], len(prompts)) for i, call in enumerate(calls)]


def _await_all(
    calls: Sequence[RewardCall],
    pending: Mapping[int, Awaitable[Any]],
    responses: Sequence[str],
    limit: float | None,
    timeout_key: str,
) -> list[Any]:
    """Await the async functions together; one past ``limit`` is cancelled and named."""
    running: dict[str, int] = {}  # which function's code runs now (one blocking the loop)

    async def timed(position: int, awaitable: Awaitable[Any]) -> Any:
        running["position"] = position
        try:
            return await awaitable
        except SystemExit as exc:
            raise _exited(exc) from None

    async def gather() -> list[Any]:
        tasks = [asyncio.ensure_future(timed(p, a)) for p, a in pending.items()]
        _done, late = await asyncio.wait(tasks, timeout=limit)
        if late:
            index = tasks.index(next(t for t in tasks if t in late))
            stack = _coroutine_frames(tasks[index].get_coro())
            for task in late:
                task.cancel()
            label = calls[list(pending)[index]].label
            raise timeout_error(label, limit or 0.0, timeout_key, responses, stack)
        for position, task in zip(pending, tasks, strict=True):
            error = task.exception()
            if isinstance(error, DeadlineExceeded):  # it blocked the loop until interrupted
                frames = _tb_frames(error)
                raise timeout_error(calls[position].label, limit or 0.0, timeout_key, responses,
                                    frames)  # fmt: skip
        return [t.exception() or t.result() for t in tasks]

    blocked = None if limit is None else limit + ASYNC_SLACK_S
    try:
        with deadline(blocked, "async reward functions", log_stack=False):
            return run_awaitable(gather())
    except DeadlineExceeded as exc:
        label = calls[running.get("position", next(iter(pending)))].label
        helper = getattr(exc, "helper_frames", None)
        frames = helper or _tb_frames(exc)
        error = timeout_error(label, limit or 0.0, timeout_key, responses, frames)
        if helper is not None:  # its loop ran on a thread of run_awaitable's, left running
            error = RewardFunctionError(
                f"{error} (its event loop's thread cannot be stopped and is abandoned, still "
                "running: restart the process if it holds resources)"
            )
        raise error from None
