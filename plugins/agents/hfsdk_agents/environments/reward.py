"""The ``environment`` reward function: each trajectory's reward as its environment gave it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hfsdk import HfsdkError
from hfsdk_agents.environments.loop import REWARD_KEY

REWARD_FUNCTION_NAME = "environment"
"""Registry name of :func:`environment_reward`."""


def environment_reward(
    prompts: list[str],
    responses: list[str],
    agent_trajectory: Sequence[Any] | None = None,
    **columns: Any,
) -> list[float]:
    """``reward()`` of each trajectory's environment (the environment loop recorded it)."""
    if agent_trajectory is None:
        raise HfsdkError(
            "the 'environment' reward reads the agent loop's trajectories, and this batch has "
            "none; use it with rollout.multi_turn.environment or environment_column"
        )
    scores = []
    for record in agent_trajectory:
        extra = (record or {}).get("extra", {})
        if REWARD_KEY not in extra:
            raise HfsdkError(
                "a trajectory has no environment reward (it did not run in an environment); "
                "the 'environment' reward needs rollout.multi_turn.environment or "
                "environment_column on every row"
            )
        scores.append(float(extra[REWARD_KEY]))
    return scores
