"""SFT's config checks: settings its program cannot honour are refused before the run."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk.core.config import load_run_config


def test_the_run_config_refuses_a_reference_kl_loss() -> None:
    # Before: accepted, then step 1 failed asking for ref_log_probs ("run the earlier stages").
    with pytest.raises(hfsdk.ConfigError, match=r"kl_loss_coef=0.1: SFT has no reference role"):
        load_run_config("sft", None, ["algorithm.kl_loss_coef=0.1"])


def test_the_default_sft_config_passes() -> None:
    assert load_run_config("sft", None, []).algorithm.kl_loss_coef == 0


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        # Before: accepted; ppo_clip trained a clipped objective with sft/loss null.
        ("algorithm.policy_loss=ppo_clip", r"policy_loss='ppo_clip': SFT trains with the nll"),
        # Before: accepted and never read (SFT samples nothing and has no reward).
        ("algorithm.kl_coef=0.5", r"kl_coef=0.5: algorithm 'sft' never reads it"),
        ("algorithm.kl_in_reward=true", r"kl_in_reward=True: algorithm 'sft' never reads it"),
        ("algorithm.n_samples_per_prompt=4", r"n_samples_per_prompt=4: algorithm 'sft' never"),
        ("algorithm.kl_estimator=k3", r"kl_estimator='k3': algorithm 'sft' never reads it"),
    ],
)
def test_the_run_config_refuses_rl_settings_sft_never_reads(override: str, needle: str) -> None:
    with pytest.raises(hfsdk.ConfigError, match=needle) as info:
        load_run_config("sft", None, [override])
    assert "remove it" in str(info.value) or "set algorithm.policy_loss: nll" in str(info.value)
