"""hfsdk-plugin-agents: multi-turn rollouts with tools (docs/agents.md).

The public names of agent authors: subclass :class:`AgentLoop`, write tools
(plain functions, or :class:`Tool`), raise :class:`ToolError`, return images with
:class:`ToolResult`, build a
:class:`Trajectory` of :class:`Segment` s, parse calls into :class:`ParsedTurn`
and :class:`ToolCall`; ``rollout.multi_turn`` is :class:`MultiTurnConfig`.
Loaded lazily so the plugin's hooks load without importing the loop machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfsdk_agents.config import MultiTurnConfig
    from hfsdk_agents.loops import AgentContext, AgentLoop
    from hfsdk_agents.parsers import ParsedTurn, ToolCall
    from hfsdk_agents.tools import Tool, ToolError, ToolResult
    from hfsdk_agents.trajectory import Segment, Trajectory

_LAZY = {
    "AgentLoop": "hfsdk_agents.loops",
    "AgentContext": "hfsdk_agents.loops",
    "Tool": "hfsdk_agents.tools",
    "ToolError": "hfsdk_agents.tools",
    "ToolResult": "hfsdk_agents.tools",
    "ParsedTurn": "hfsdk_agents.parsers",
    "ToolCall": "hfsdk_agents.parsers",
    "Trajectory": "hfsdk_agents.trajectory",
    "Segment": "hfsdk_agents.trajectory",
    "MultiTurnConfig": "hfsdk_agents.config",
}

__all__ = [
    "AgentContext",
    "AgentLoop",
    "MultiTurnConfig",
    "ParsedTurn",
    "Segment",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "Trajectory",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hfsdk_agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
