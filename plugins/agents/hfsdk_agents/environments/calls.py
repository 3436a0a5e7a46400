"""Calling an environment's tool on the trajectory's own instance.

Environment tools are stateful methods, so they run in this process, in the
agent loop's thread, on the instance the trajectory holds (a forked tool worker
would change a copy). They are the environment author's code — like a reward
function — not model-written code: they do not pass through the tool worker
process (no kill at the deadline) or the sandbox. A sync method runs to its end;
an ``async`` one is cancelled at ``timeout_s``. Every failure becomes the
tool's output as an error message, exactly as for plain tools
(:func:`hfsdk_agents.tools.call_tool`), and the trajectory goes on.

The arguments are checked against the tool's JSON schema first. Only a regular expression
(a ``pattern`` or ``patternProperties``) can make that check slow: one that backtracks on the
model's string would stall the event loop, every trajectory on it, past ``timeout_s`` (a
thread would not help: ``re`` holds the GIL while it matches). So a schema with one is
checked in a worker process (:class:`~hfsdk_agents.tool_worker.ToolWorkers`) within
``timeout_s``, and every other schema here, in-process (microseconds, where a worker's
round trip costs milliseconds). The check's bound and the ``async`` tool's are each
``timeout_s``: the worker's start (a fork at the first call) never shortens the tool's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import time
from collections.abc import Mapping
from typing import Any

from hfsdk_agents.argument_checks import checked_arguments, parameters_json
from hfsdk_agents.tool_worker import ToolError, ToolWorkers, _as_text, _said
from hfsdk_agents.tools import Tool, ToolOutput, cut_text


class _Deadline(Exception):
    """The call's own deadline passed (``asyncio.wait_for``'s timeout, told apart from a
    ``TimeoutError`` the tool raised)."""


async def _awaited(value: Any, timeout_s: float) -> Any:
    """``value`` awaited within ``timeout_s``; only the deadline itself is :class:`_Deadline`."""
    task = asyncio.ensure_future(value)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:  # the run stopped: the tool's coroutine stops with it
        task.cancel()
        raise
    if not done:
        task.cancel()
        # Whatever the cancelled coroutine ends with, the call's answer is the deadline.
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task
        raise _Deadline
    return task.result()


_CHECK = "check_arguments"
"""The checker process's one function (:func:`_check_in_worker`)."""


def _any_arguments(**arguments: Any) -> None:
    """A signature that takes any keywords: the checker has no method to bind them to (the
    caller binds them to the method's signature)."""


def _check_in_worker(schema_json: str, arguments: dict[str, Any]) -> str:
    """Runs in the checker process: JSON of ``{"problem": why they do not fit the schema or
    null, "integers": [names of integral floats that become ints]}``.

    Only the names come back, not the arguments: the caller converts its own objects, so
    nothing the model sent changes on the way there and back.
    """
    try:
        checked, problem = checked_arguments(schema_json, _any_arguments, arguments)
    except BaseException as err:  # jsonschema's own failure: an answer, not a hang
        checked = arguments
        problem = f"the arguments could not be checked ({type(err).__name__}: {_said(err)})"
    integers = [
        key
        for key, value in checked.items()
        if isinstance(value, int) and isinstance(arguments.get(key), float)
    ]
    return json.dumps({"problem": problem, "integers": integers})


_CHECKER = ToolWorkers({_CHECK: _check_in_worker})
"""One checker for every environment of this process: forked at the first call, replaced
after a check passes its deadline (killed then), killed at exit."""


def _holds_regex(schema: Any) -> bool:
    """Whether ``schema`` has a ``pattern`` (a string) or ``patternProperties`` anywhere:
    the only keywords whose check can backtrack. A property named ``pattern`` (a schema, not
    a string) does not count."""
    if isinstance(schema, Mapping):
        return any(
            (key == "pattern" and isinstance(value, str))
            or key == "patternProperties"
            or _holds_regex(value)
            for key, value in schema.items()
        )
    if isinstance(schema, list):
        return any(_holds_regex(item) for item in schema)
    return False


@functools.lru_cache(maxsize=256)
def _needs_worker(schema_json: str) -> bool:
    """Whether the schema (as JSON) is checked in the worker process (it holds a regex)."""
    return _holds_regex(json.loads(schema_json))


async def _checked(
    name: str, fn: Any, parameters: Any, arguments: Mapping[str, Any], timeout_s: float
) -> tuple[dict[str, Any], str | None, str | None]:
    """``(arguments as ``fn`` gets them, the model's error message or None, its error kind)``:
    a schema without a regex checked here, one with a regex in the checker process within
    ``timeout_s`` (then ``fn``'s signature here)."""
    schema_json = parameters_json(parameters)
    if not _needs_worker(schema_json):
        checked, problem = checked_arguments(schema_json, fn, arguments)
        if problem is not None:
            return dict(arguments), f"{name}: {problem}", "bad_arguments"
        return checked, None, None
    call = {"schema_json": schema_json, "arguments": dict(arguments)}
    kind, output = await _CHECKER.run(_CHECK, call, timeout_s)
    if kind == "timeout":
        message = (
            f"{name} was not called: checking its arguments against its schema took over "
            f"{timeout_s:g} s; send shorter or simpler arguments"
        )
        return dict(arguments), message, "timeout"
    if kind == "stopped":
        return dict(arguments), f"{name} was not called: the run is stopping", "stopped"
    if kind != "ok":  # the checker died (crashed), or the arguments could not be sent to it
        said = str(output).removeprefix(f"{_CHECK}: ")
        return dict(arguments), f"{name} was not called: {said}", kind
    answer = json.loads(str(output))
    if answer["problem"] is not None:
        return dict(arguments), f"{name}: {answer['problem']}", "bad_arguments"
    integers = set(answer["integers"])
    arguments = {key: int(value) if key in integers else value for key, value in arguments.items()}
    try:  # as checked_arguments ends; no schema here, nothing that can take long
        inspect.signature(fn).bind(**arguments)
    except (TypeError, ValueError) as err:
        return arguments, f"{name}: {err}", "bad_arguments"
    return arguments, None, None


def bound_tools(spec_schemas: Mapping[str, Mapping[str, Any]], env: Any) -> dict[str, Tool]:
    """The tools of one environment instance: its bound methods with the class's schemas."""
    return {
        name: Tool(name=name, fn=getattr(env, name), schema=schema)
        for name, schema in spec_schemas.items()
    }


async def call_environment_tool(
    tools: Mapping[str, Tool],
    name: str,
    arguments: Any,
    *,
    timeout_s: float,
    max_output_chars: int,
) -> ToolOutput:
    """One call of an environment tool; every failure is an error output, never a raise."""
    started = time.perf_counter()

    def out(content: str, ok: bool, error: str | None = None) -> ToolOutput:
        cut = cut_text(content, max_output_chars)
        return ToolOutput(
            name=name,
            content=content if cut is None else cut,
            ok=ok and cut is None,
            error=error,
            seconds=time.perf_counter() - started,
        )

    tool = tools.get(name)
    if tool is None:
        return out(
            f"Error: unknown tool {name!r}; available: {sorted(tools)}", False, "unknown_tool"
        )
    if not isinstance(arguments, Mapping):
        return out(f"Error: arguments of {name!r} must be a JSON object", False, "bad_arguments")
    # The arguments as checked (1.0 -> 1 for an integer parameter), as a plain tool gets them.
    arguments, problem, kind = await _checked(name, tool.fn, tool.parameters, arguments, timeout_s)
    if problem is not None:
        return out(f"Error: {problem}", False, kind)
    try:
        value = tool.fn(**arguments)
        if inspect.isawaitable(value):
            # The tool's own timeout_s: the check (and the checker's fork) had its own bound.
            value = await _awaited(value, timeout_s)
    except _Deadline:
        return out(f"Error: {name} did not return within {timeout_s:g} s", False, "timeout")
    except ToolError as err:
        return out(f"Error: {err}", False, "tool_error")
    except (asyncio.CancelledError, KeyboardInterrupt):  # a stop: the run's, not the tool's
        raise
    except BaseException as err:  # sys.exit() in a tool ends the call, not the run
        # A TimeoutError the tool raised itself (its server timed out) lands here too: it is
        # the tool's exception, not the call's deadline.
        return out(f"Error: {name} raised {type(err).__name__}: {err}", False, "exception")
    try:
        text = _as_text(value)
    except (TypeError, ValueError, RecursionError):
        return out(
            f"Error: {name} returned a {type(value).__name__}, not text or JSON",
            False,
            "bad_output",
        )
    return out(text, True, None if len(text) <= max_output_chars else "too_long")
