"""Calling an environment's tool on the trajectory's own instance.

Environment tools are stateful methods, so they run in this process, in the
agent loop's thread, on the instance the trajectory holds (a forked tool worker
would change a copy). They are the environment author's code — like a reward
function — not model-written code: they do not pass through the tool worker
process (no kill at the deadline) or the sandbox. A sync method runs to its end;
an ``async`` one is cancelled at ``timeout_s``. Every failure becomes the
tool's output as an error message, exactly as for plain tools
(:func:`hfsdk_agents.tools.call_tool`), and the trajectory goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Mapping
from typing import Any

from hfsdk_agents.argument_checks import checked_arguments, parameters_json
from hfsdk_agents.tool_worker import ToolError, _as_text
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
    arguments, problem = checked_arguments(parameters_json(tool.parameters), tool.fn, arguments)
    if problem is not None:
        return out(f"Error: {name}: {problem}", False, "bad_arguments")
    try:
        value = tool.fn(**arguments)
        if inspect.isawaitable(value):
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
