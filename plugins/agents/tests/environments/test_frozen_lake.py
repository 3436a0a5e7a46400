"""FrozenLake: gymnasium's dynamics, and GRPO's rewards are the episodes' real outcomes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hfsdk_agents.environments.frozen_lake import ACTIONS, LAKE_MAP, FrozenLake, render_board


def test_moves_follow_the_lake_map() -> None:
    lake = FrozenLake()
    assert lake.reset({}) == "PFH\nFFF\nHFG\nok"
    assert lake.move("left") == "PFH\nFFF\nHFG\nok"  # the edge: stays put
    assert lake.move("right") == "SPH\nFFF\nHFG\nok"
    assert lake.move("right") == "SFP\nFFF\nHFG\nhole"
    assert lake.done and lake.reward() == 0.0
    lake.reset({})
    for direction in ("down", "right", "right"):
        assert not lake.done
        lake.move(direction)
    assert lake.move("down") == "SFH\nFFF\nHFP\ngoal"
    assert lake.done and lake.reward() == 1.0
    lake.close()


def _replay(segments: list[dict[str, Any]]) -> tuple[float, list[str]]:
    """The episode's success in a fresh gymnasium FrozenLake, and the boards it showed."""
    import gymnasium

    env = gymnasium.make("FrozenLake-v1", desc=list(LAKE_MAP), is_slippery=False)
    state, _ = env.reset(seed=0)
    success, boards, terminated = 0.0, [], False
    calls: list[dict[str, Any]] = []
    for segment in segments:
        if segment["role"] == "assistant":
            calls = [c for c in segment["tool_calls"] if "name" in c]
        elif segment["role"] == "tool":
            for call, result in zip(calls, segment["tool_results"], strict=False):
                if not result["ok"]:
                    continue
                assert not terminated
                action = ACTIONS[call["arguments"]["direction"]]
                state, reward, terminated, _, _ = env.step(action)
                success += reward
                status = "goal" if reward > 0 else ("hole" if terminated else "ok")
                boards.append(render_board(LAKE_MAP, int(state), status))
                assert result["content"] == boards[-1]
    return success, boards


@pytest.mark.slow
def test_grpo_rewards_are_the_replayed_episodes_success(tmp_path: Path) -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer
    from hfsdk_agents.environments.frozen_lake_build import ensure_frozen_lake_assets
    from hfsdk_agents.environments.frozen_lake_task import frozen_lake_preset

    base = frozen_lake_preset(ensure_frozen_lake_assets())
    config = load_run_config(
        "grpo", None, ["trainer.total_steps=2", "trainer.rollout_dump=true"], base=base
    )
    Trainer(config, tmp_path, quiet=True).fit()
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    moves = 0
    for step in (1, 2):
        lines = (tmp_path / "rollouts" / f"step_{step}.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert len(records) == 64  # 8 prompts x 8 samples
        for record in records:
            success, boards = _replay(record["trajectory"]["segments"])
            assert record["reward"] == success
            moves += len(boards)
        mean = sum(r["reward"] for r in records) / len(records)
        assert metrics[step - 1]["reward/mean"] == pytest.approx(mean, abs=1e-6)
        assert 0.0 < metrics[step - 1]["agent/tool_call_success"] <= 1.0
    assert moves > 64  # the model walks: more than one move per episode on average
