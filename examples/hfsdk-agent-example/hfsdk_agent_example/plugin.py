"""Hook implementations of the example agent plugin."""

from __future__ import annotations

import hfsdk


@hfsdk.hookimpl
def hfsdk_register_tools(register):  # type: ignore[no-untyped-def]
    """Register ``slow_add``."""
    from hfsdk_agent_example.tools import slow_add

    register("slow_add", slow_add)


@hfsdk.hookimpl
def hfsdk_register_agent_loops(register):  # type: ignore[no-untyped-def]
    """Register ``traced_tool_loop``."""
    from hfsdk_agent_example.loops import TracedToolLoop

    register("traced_tool_loop", TracedToolLoop)
