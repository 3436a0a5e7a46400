"""``agent_reward``: the reward an agent returned or posted to its session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

REWARD_FUNCTION_NAME = "agent_reward"
"""Registry name of :func:`agent_reward`."""


def agent_reward(
    prompts: list[str],
    responses: list[str],
    agent_trajectory: Sequence[Any] | None = None,
    **columns: Any,
) -> list[float]:
    """Each row's ``extra["agent_reward"]`` (0.0 where the agent gave none or was dropped)."""
    if agent_trajectory is None:
        return [0.0] * len(responses)
    out = []
    for record in agent_trajectory:
        extra = record.get("extra", {}) if isinstance(record, dict) else {}
        out.append(float(extra.get("agent_reward", 0.0)))
    return out
