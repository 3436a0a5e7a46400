"""``hfsdk replay`` needs no rewards plugin: it re-runs recorded updates and scores nothing.

A run's preparation builds a scorer for every signal that lists reward functions and
refuses when no plugin builds one (``HFSDK_DISABLE_PLUGINS=rewards``); replay prepares
the run the same way, so it was refused although its updates use the dumped rewards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk.core.reward_scoring import build_reward_scorer
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_run_records.replay import replay_steps
from hfsdk_testing import SMALL_GRPO


@pytest.fixture(autouse=True)
def _plugins_restored() -> Iterator[None]:
    """Every plugin enabled again after the test (monkeypatch restores the variable)."""
    yield
    reset_plugin_manager()


def _disable_rewards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "rewards")
    reset_plugin_manager()


@pytest.mark.slow
def test_replay_with_the_rewards_plugin_disabled_reproduces_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run is made with the plugin enabled (it scores), the replay without it.
    run_dir = tmp_path / "run"
    overrides = [*SMALL_GRPO, "trainer.total_steps=1", "trainer.rollout_dump=true"]
    Trainer(load_run_config("grpo", None, overrides), run_dir, quiet=True).fit()
    _disable_rewards(monkeypatch)
    (result,) = replay_steps(run_dir, 1)
    assert {"actor/pg_loss", "actor/grad_norm"} <= set(result.compared)
    assert result.differing == []


def test_replays_stand_in_scorer_never_scores_and_is_gone_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hfsdk_run_records.replay import _scoring_not_needed

    _disable_rewards(monkeypatch)
    config = load_run_config("grpo", None, []).reward
    with _scoring_not_needed():
        scorer = build_reward_scorer("reward", config)
        with pytest.raises(HfsdkError, match=r"hfsdk replay was asked to score reward\.functions"):
            scorer.score(["p"], ["r"], {})
    with pytest.raises(HfsdkError, match=r"comes with hfsdk-plugin-rewards, whose plugin"):
        build_reward_scorer("reward", config)


def test_with_the_rewards_plugin_enabled_replay_builds_its_scorer() -> None:
    from hfsdk_run_records.replay import _NoScoring, _scoring_not_needed

    config = load_run_config("grpo", None, ["reward.functions=[{name: exact_match}]"]).reward
    with _scoring_not_needed():
        assert not isinstance(build_reward_scorer("reward", config), _NoScoring)
