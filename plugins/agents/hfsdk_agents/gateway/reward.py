"""``agent_reward``: the reward an agent returned or posted to its session."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hfsdk import StepObserver, StepView
from hfsdk_agents.config import multi_turn_config

logger = logging.getLogger(__name__)

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


class UnusedAgentRewards(StepObserver):
    """Warns (once) when gateway agents return rewards the run's reward functions never read.

    Built only for a gateway run whose ``reward.functions`` leave out ``agent_reward``:
    the docs promise that an agent's number is used only through that function, so a run
    that forgot it trains on another signal and should say so.
    """

    def __init__(self, scored_by: list[str]) -> None:
        self.scored_by = scored_by
        self.warned = False

    def on_step_trained(self, view: StepView) -> None:
        """Count the trained rows whose agent gave a reward; warn at the first step with any."""
        batch = view.algorithm.last_batch
        if self.warned or batch is None or "agent_trajectory" not in batch:
            return
        records = batch["agent_trajectory"]
        given = sum(1 for r in records if "agent_reward" in r.get("extra", {}))
        if given:
            self.warned = True
            logger.warning(
                "step %d: gateway agents returned a reward for %d of %d rows, but "
                "reward.functions (%s) does not list %s, so those rewards were not used; "
                "add {name: %s} to reward.functions to train on them",
                view.step,
                given,
                len(records),
                ", ".join(self.scored_by) or "none",
                REWARD_FUNCTION_NAME,
                REWARD_FUNCTION_NAME,
            )


def unused_agent_rewards_observer(config: Any, _run_dir: Path) -> UnusedAgentRewards | None:
    """The ``unused_agent_rewards`` step observer's factory: only for a gateway run whose
    reward functions leave out ``agent_reward`` (any other run costs nothing)."""
    if multi_turn_config(config.rollout).loop_name != "gateway":
        return None
    names = [f.name or "remote" for f in config.reward.functions]
    if REWARD_FUNCTION_NAME in names:
        return None
    return UnusedAgentRewards(names)
