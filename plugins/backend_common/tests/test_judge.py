"""The ``llm_judge`` reward: a local model's verdict, through a registered rollout backend."""

from __future__ import annotations

from pathlib import Path

import pytest

import hfsdk
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_backend_common.judge import JudgeConfig, llm_judge

# The default task's model answers "a + b =" with a number: its verdict on the
# filled-in template is that number, read by the score pattern.
CONFIG = JudgeConfig(template="{prompt}", max_score=20.0)


def test_verdicts_are_generated_and_parsed_into_clamped_scores() -> None:
    rows = llm_judge(["3 + 4 =", "1 + 1 =", "9 + 8 ="], ["", "", ""], config=CONFIG)
    assert [set(r) for r in rows] == [{"score", "parsed"}] * 3
    assert sum(r["parsed"] for r in rows) >= 2  # greedy answers of an addition model
    assert all(0.0 <= r["score"] <= 20.0 for r in rows)
    clamped = llm_judge(["9 + 8 ="], [""], config=JudgeConfig(template="{prompt}", max_score=1.0))
    assert clamped[0]["score"] <= 1.0


def test_a_verdict_without_a_score_gets_no_score() -> None:
    config = JudgeConfig(template="{prompt}", score_pattern=r"(zzz\d)", no_score=-1.0)
    assert llm_judge(["3 + 4 ="], [""], config=config) == [{"score": -1.0, "parsed": 0.0}]


def test_a_template_wider_than_the_rollouts_default_prompt_is_judged() -> None:
    """The judge's rollout takes what the judge model can read (its 128 positions less
    max_verdict_tokens=8), not the rollout config's default max_prompt_length of 64."""
    prompt = "1 + 1 = 2. " * 18 + "3 + 4 ="  # 94 tokens
    rows = llm_judge([prompt], [""], config=CONFIG)
    assert [set(r) for r in rows] == [{"score", "parsed"}]


def test_a_template_beyond_the_judge_models_positions_is_refused() -> None:
    prompt = "1 + 1 = 2. " * 30 + "3 + 4 ="  # 154 tokens
    with pytest.raises(HfsdkError, match=r"^llm_judge: a filled-in template is 154 tokens") as info:
        llm_judge([prompt], [""], config=CONFIG)
    message = str(info.value)
    assert "120 tokens" in message and "max_verdict_tokens=8" in message
    assert "rollout.max_prompt_length" not in message  # a run setting that does not apply


def test_a_verdict_as_long_as_the_judges_positions_is_refused() -> None:
    config = JudgeConfig(template="{prompt}", max_verdict_tokens=128)
    with pytest.raises(HfsdkError, match=r"max_verdict_tokens=128 leaves no room .* 128 positions"):
        llm_judge(["1 + 1 ="], [""], config=config)


def test_template_fields_must_exist() -> None:
    with pytest.raises(HfsdkError, match=r"the template names 'answer'"):
        llm_judge(["p"], ["r"], config=JudgeConfig(template="{answer}"))
    with pytest.raises(ValueError, match="needs a group around the score"):
        JudgeConfig(score_pattern=r"\d+")


def test_it_is_registered() -> None:
    assert hfsdk.get_registry("reward_functions")["llm_judge"].config_cls is JudgeConfig


@pytest.mark.slow
def test_grpo_trains_on_the_judges_scores(tmp_path: Path) -> None:
    overrides = [
        "trainer.total_steps=2",
        "data.batch_size=4",
        "algorithm.n_samples_per_prompt=2",
        "actor.mini_batch_size=8",
        "reward.functions=[{name: llm_judge, kwargs: {template: '{prompt}', max_score: 20}}]",
    ]
    rows = Trainer(load_run_config("grpo", None, overrides), tmp_path, quiet=True).fit()
    assert [r["step"] for r in rows] == [1, 2]
    assert all("reward/llm_judge/parsed" in r and "actor/pg_loss" in r for r in rows)
