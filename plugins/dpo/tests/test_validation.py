"""DPO's config checks: settings DPO never reads are refused with the config, in one line."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk.core.config import load_run_config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # ppo_clip has no beta: the run died at step 1 with an AttributeError.
        (["algorithm.policy_loss=ppo_clip"], r"policy_loss='ppo_clip'.*dpo loss only"),
        (["algorithm.policy_loss=nll"], r"policy_loss='nll'.*set algorithm.policy_loss: dpo"),
        (["algorithm.advantage_estimator=grpo", "algorithm.n_samples_per_prompt=4"],
         r"advantage_estimator='grpo'.*estimates no advantages"),
        (["algorithm.kl_in_reward=true", "algorithm.kl_coef=0.3"],
         r"kl_in_reward=True.*no reward to put a KL in"),
        (["algorithm.kl_coef=0.3"], r"kl_coef=0.3.*would do nothing; remove it"),
        (["algorithm.n_samples_per_prompt=2"], r"n_samples_per_prompt=2.*samples nothing"),
        (["algorithm.loss_agg_mode=seq-mean-token-sum"],
         r"loss_agg_mode='seq-mean-token-sum'.*mean over pairs"),
    ],
)  # fmt: skip
def test_settings_dpo_never_reads_are_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(hfsdk.ConfigError, match=message):
        load_run_config("dpo", None, overrides)


def test_the_default_config_and_the_settings_dpo_reads_are_accepted() -> None:
    config = load_run_config(
        "dpo",
        None,
        ["policy_loss.beta=0.5", "algorithm.kl_loss_coef=0.1", "algorithm.entropy_coef=0.01"],
    )
    assert config.algorithm.policy_loss == "dpo"


@pytest.mark.parametrize("algo", ["grpo", "ppo", "sft", "distill"])
def test_the_dpo_loss_is_refused_in_other_algorithms(algo: str) -> None:
    # It paired up another algorithm's rows as (chosen, rejected) without a word.
    with pytest.raises(hfsdk.ConfigError, match=rf"policy_loss='dpo' in a {algo} run.*--algo dpo"):
        load_run_config(algo, None, ["algorithm.policy_loss=dpo"])


def test_an_algorithm_config_without_a_policy_loss_is_no_problem() -> None:
    # The reward model's config has no policy_loss: its runs failed to load.
    assert load_run_config("reward_model", None, []).algo == "reward_model"
