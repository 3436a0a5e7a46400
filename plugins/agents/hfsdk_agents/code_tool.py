"""The built-in ``python`` tool: run a model-written snippet in the sandbox.

The snippet never runs in a worker process: :func:`hfsdk_sandbox.run_python`
runs it under bubblewrap (its own namespaces, uid 65534, a seccomp filter, a
pids cgroup, a tmpfs working directory) with wall-clock, CPU and memory limits
and output read through capped pipes (``docs/agents.md#sandbox-layers``). The
model reads the program's stdout, or the sandbox's one-line reason when it did
not finish cleanly (``timeout``, ``memory``, ``refused: ...``).
"""

from __future__ import annotations

import asyncio

from hfsdk_agents.tools import ToolError
from hfsdk_sandbox import run_python
from hfsdk_sandbox.limits import PYTHON_TOOL_LIMITS

CODE_TOOL_LIMITS = PYTHON_TOOL_LIMITS
"""The limits of one ``python`` tool call."""


async def python_tool(code: str) -> str:
    """Run a Python program and return what it printed.

    Args:
        code: The Python source to run; print the result you want to see.
    """
    result = await asyncio.to_thread(run_python, code, limits=CODE_TOOL_LIMITS)
    if result.ok:
        return result.stdout
    if result.status == "error":
        tail = result.stderr.strip().splitlines()[-1:] or [result.reason]
        raise ToolError(f"{result.stdout[:2000]}{tail[0][:500]}")
    raise ToolError(f"{result.stdout[:2000]}{result.reason}")
