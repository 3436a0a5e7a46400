"""A gateway agent's reward that no reward function reads is warned about, once."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from hfsdk import Batch
from hfsdk.core.config import load_run_config
from hfsdk_agents.gateway.reward import unused_agent_rewards_observer

AGENT = "rollout.multi_turn.agent=tool_use"


def _view(step: int, extras: list[dict]) -> SimpleNamespace:
    records = np.empty(len(extras), dtype=object)
    records[:] = [{"finish": "stop", "extra": e} for e in extras]
    batch = Batch(non_tensors={"agent_trajectory": records})
    return SimpleNamespace(step=step, algorithm=SimpleNamespace(last_batch=batch))


def test_warns_once_when_agent_rewards_go_unread(caplog: pytest.LogCaptureFixture) -> None:
    config = load_run_config("grpo", None, [AGENT, "reward.functions=[{name: exact_match}]"])
    observer = unused_agent_rewards_observer(config, None)
    assert observer is not None
    with caplog.at_level(logging.WARNING):
        observer.on_step_trained(_view(1, [{}, {}]))  # no agent gave one: nothing to say
        assert not caplog.records
        observer.on_step_trained(_view(2, [{"agent_reward": 1.0}, {}]))
        observer.on_step_trained(_view(3, [{"agent_reward": 0.0}]))
    (record,) = caplog.records
    message = record.getMessage()
    assert "step 2" in message and "1 of 2 rows" in message
    assert "(exact_match)" in message and "{name: agent_reward}" in message


@pytest.mark.parametrize(
    "overrides",
    [
        [AGENT, "reward.functions=[{name: agent_reward}, {name: exact_match}]"],
        ["rollout.multi_turn.tools=[add]", "reward.functions=[{name: exact_match}]"],
    ],
)
def test_not_built_when_rewards_are_read_or_no_gateway(overrides: list[str]) -> None:
    assert unused_agent_rewards_observer(load_run_config("grpo", None, overrides), None) is None
