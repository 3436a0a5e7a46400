"""DAPO end to end on the default task: it learns, drops uniform groups and draws more."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import ConfigError, get_registry
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def test_it_is_registered_with_clip_higher_and_no_kl() -> None:
    config = load_run_config("dapo", None, [])
    assert config.algorithm.policy_loss == "dapo_clip"
    assert config.algorithm.loss_agg_mode == "token-mean"
    assert (config.policy_loss.clip_ratio_low, config.policy_loss.clip_ratio_high) == (0.2, 0.28)
    spec = get_registry("algorithms")["dapo"].impl
    assert spec.roles_of_kind("frozen_policy") == ()


def test_a_kl_term_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="dapo trains without a reference model"):
        load_run_config("dapo", None, ["algorithm.kl_loss_coef=0.1"])


@pytest.mark.slow
def test_default_task_learns_and_reports_dynamic_sampling(tmp_path: Path) -> None:
    overrides = ["trainer.total_steps=12", "algorithm.overlong_buffer_len=2"]
    rows = Trainer(load_run_config("dapo", None, overrides), tmp_path, quiet=True).fit()
    assert [r["step"] for r in rows] == list(range(1, 13))
    for row in rows:
        # 16 prompts a step, groups of 4; uniform groups dropped, more prompts drawn.
        assert row["dynamic_sampling/prompts_drawn"] >= 16
        assert row["dynamic_sampling/groups_kept"] <= 16
        drawn_rounds = row["dynamic_sampling/prompts_drawn"] / 16
        assert drawn_rounds == row["dynamic_sampling/generation_rounds"]
    assert sum(r["dynamic_sampling/groups_dropped"] for r in rows) > 0
    assert max(r["dynamic_sampling/generation_rounds"] for r in rows) > 1
    assert all(r["overlong/penalty_mean"] <= 0 for r in rows)
    key = "dynamic_sampling/reward_before_filter"  # the policy's, before groups are dropped
    gain = _mean(rows[-4:], key) - _mean(rows[:4], key)
    assert gain >= 0.1, f"reward rose by only {gain:.3f}"


def test_reward_mean_is_the_trained_groups_and_before_filter_unshaped(tmp_path: Path) -> None:
    import json

    def run(name: str, buffer: int) -> dict:
        overrides = ["trainer.total_steps=1", "trainer.rollout_dump=true",
                     f"algorithm.overlong_buffer_len={buffer}"]  # fmt: skip
        (row,) = Trainer(
            load_run_config("dapo", None, overrides), tmp_path / name, quiet=True
        ).fit()
        return row

    row = run("plain", 0)
    dumped = (tmp_path / "plain" / "rollouts" / "step_1.jsonl").read_text().splitlines()
    rewards = [json.loads(line)["reward"] for line in dumped]
    assert len(rewards) == 64 and row["dynamic_sampling/groups_dropped"] > 0
    # Before: the last generation round's mean over all its samples, dropped groups included.
    assert row["reward/mean"] == pytest.approx(sum(rewards) / len(rewards))
    # With the overlong penalty on, both reward means stay the 0/1 reward's (a multiple of
    # 1/64); the penalty is overlong/penalty_mean's. Before: reward_before_filter held it.
    row = run("shaped", 2)
    assert row["overlong/penalty_mean"] < 0
    for key in ("reward/mean", "dynamic_sampling/reward_before_filter"):
        assert row[key] * 64 == pytest.approx(round(row[key] * 64)), key


def test_an_overlong_buffer_as_long_as_the_responses_is_refused() -> None:
    # Before: accepted, and every response was penalised (penalty_mean -0.995 at length 3).
    with pytest.raises(ConfigError, match=r"overlong_buffer_len=8 is not shorter than the resp"):
        load_run_config("dapo", None, ["algorithm.overlong_buffer_len=8"])
    load_run_config("dapo", None, ["algorithm.overlong_buffer_len=7"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["algorithm.overlong_penalty_factor=0.5"],
            r"overlong_penalty_factor=0.5 does nothing while overlong_buffer_len=0",
        ),
        (
            ["algorithm.dynamic_sampling=false", "algorithm.max_generation_rounds=10"],
            r"max_generation_rounds=10 does nothing while dynamic_sampling=false",
        ),
    ],
)
def test_settings_that_would_do_nothing_are_refused(overrides: list[str], message: str) -> None:
    # Before: accepted, and the run trained without the shaping or the rounds asked for.
    with pytest.raises(ConfigError, match=message):
        load_run_config("dapo", None, overrides)


def test_the_settings_are_accepted_where_they_act() -> None:
    load_run_config(
        "dapo", None, ["algorithm.overlong_buffer_len=2", "algorithm.overlong_penalty_factor=0.5"]
    )
    load_run_config("dapo", None, ["algorithm.max_generation_rounds=10"])
    load_run_config("dapo", None, ["algorithm.dynamic_sampling=false"])
