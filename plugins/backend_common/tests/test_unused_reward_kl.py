"""Reward-KL settings beside ``kl_in_reward: false`` are warned about, not silently ignored.

GRPO puts no KL in the reward, so ``algorithm.kl_coef=0.5 kl_controller=adaptive`` loaded
without a word and the run trained with ``kl_loss_coef`` alone; only the mirror case (a
``kl_loss_coef`` beside ``kl_in_reward: true``) was warned about.
"""

from __future__ import annotations

import pytest

from hfsdk import ConfigError, get_registry
from hfsdk.core.config import load_run_config
from hfsdk_backend_common.objectives import unused_kl_loss


def test_a_reward_kl_coefficient_beside_no_kl_in_the_reward_is_named() -> None:
    config = load_run_config("grpo", None, ["algorithm.kl_coef=0.5"])
    warning = unused_kl_loss(config) or ""
    assert warning.startswith("algorithm.kl_coef=0.5 has no effect: algorithm.kl_in_reward")
    assert "algorithm.kl_in_reward=true" in warning and "algorithm.kl_loss_coef" in warning
    assert "\n" not in warning


def test_every_ignored_reward_kl_key_is_named_in_one_line() -> None:
    overrides = [
        "algorithm.kl_coef=0.5",
        "algorithm.kl_controller=adaptive",
        "algorithm.target_kl=0.01",
        "algorithm.kl_horizon=500",
    ]
    warning = unused_kl_loss(load_run_config("grpo", None, overrides)) or ""
    for key in ("kl_coef=0.5", "kl_controller=adaptive", "target_kl=0.01", "kl_horizon=500"):
        assert f"algorithm.{key}" in warning
    assert " have no effect" in warning and "\n" not in warning


def test_dapo_accepts_a_reward_kl_coefficient_it_ignores_and_is_warned() -> None:
    warning = unused_kl_loss(load_run_config("dapo", None, ["algorithm.kl_coef=0.1"]))
    assert (warning or "").startswith("algorithm.kl_coef=0.1 has no effect")


def test_dapo_is_told_to_remove_the_coefficient_not_to_set_what_it_refuses() -> None:
    # Before: "set algorithm.kl_in_reward=true ... use algorithm.kl_loss_coef", both of
    # which dapo's config refuses.
    warning = unused_kl_loss(load_run_config("dapo", None, ["algorithm.kl_coef=0.1"])) or ""
    assert "kl_in_reward=true for" not in warning and "use algorithm.kl_loss_coef" not in warning
    assert warning.endswith("remove it") and "\n" not in warning


@pytest.mark.parametrize(
    ("algo", "overrides"),
    [
        ("grpo", []),
        ("dapo", []),
        ("ppo", []),
        ("remax", []),
        ("safe_rlhf", []),
        ("distill", []),
        ("dpo", []),
        ("sft", []),
        ("reward_model", []),
        # Each algorithm's own default kl_coef beside kl_in_reward: false is a default.
        ("ppo", ["algorithm.kl_in_reward=false"]),
        ("remax", ["algorithm.kl_in_reward=false"]),
        ("safe_rlhf", ["algorithm.kl_in_reward=false"]),
        # A kl_coef of 0 asks for no KL (what the importers write without KL in the reward).
        ("ppo", ["algorithm.kl_in_reward=false", "algorithm.kl_coef=0"]),
        # With the KL in the reward these settings are read.
        ("grpo", ["algorithm.kl_in_reward=true", "algorithm.kl_coef=0.5"]),
    ],
)
def test_defaults_and_settings_that_are_read_are_not_warned_about(
    algo: str, overrides: list[str]
) -> None:
    assert unused_kl_loss(load_run_config(algo, None, overrides)) is None


def test_the_check_is_registered_as_a_preflight_check() -> None:
    assert "unused_kl_loss" in get_registry("preflight_checks")


@pytest.mark.parametrize("algo", ["ppo", "remax", "safe_rlhf"])
def test_an_adaptive_controller_starting_at_zero_is_refused_at_load(algo: str) -> None:
    # Before: accepted, and the multiplicative update kept the coefficient at 0 forever.
    overrides = ["algorithm.kl_in_reward=true", "algorithm.kl_controller=adaptive"]
    with pytest.raises(ConfigError) as info:
        load_run_config(algo, None, [*overrides, "algorithm.kl_coef=0"])
    line = str(info.value)
    assert line.startswith("algorithm.kl_controller=adaptive with algorithm.kl_coef=0")
    assert "positive starting algorithm.kl_coef" in line and "\n" not in line
    load_run_config(algo, None, [*overrides, "algorithm.kl_coef=0.05"])


def test_a_zero_coefficient_beside_an_unread_adaptive_controller_is_only_warned_about() -> None:
    # kl_in_reward: false reads no controller: the warning names it, and a saved run resumes.
    config = load_run_config("grpo", None, ["algorithm.kl_controller=adaptive"])
    assert "algorithm.kl_controller=adaptive" in (unused_kl_loss(config) or "")
