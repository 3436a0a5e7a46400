"""Estimator/algorithm mismatches around ``safe_rlhf`` are refused when the config loads."""

from __future__ import annotations

import pytest

from hfsdk import ConfigError, get_registry
from hfsdk.core.config import load_run_config


@pytest.mark.parametrize("algo", ["grpo", "dapo", "ppo"])
def test_the_safe_rlhf_estimator_outside_safe_rlhf_is_refused(algo: str) -> None:
    # Before: accepted; the run failed at step 1, after loading, generating and scoring.
    with pytest.raises(
        ConfigError,
        match=rf"advantage_estimator=safe_rlhf needs .* which algorithm '{algo}' does not have",
    ):
        load_run_config(algo, None, ["algorithm.advantage_estimator=safe_rlhf"])


@pytest.mark.parametrize("estimator", ["gae", "grpo"])
def test_another_estimator_under_safe_rlhf_is_refused(estimator: str) -> None:
    # Before: accepted; the run failed after its first rollout (no extras['cost_returns']).
    with pytest.raises(
        ConfigError,
        match=rf"advantage_estimator={estimator} cannot drive algorithm safe_rlhf",
    ):
        # Groups of 4, so grpo's own one-sample refusal is not what is seen.
        overrides = [
            f"algorithm.advantage_estimator={estimator}",
            "algorithm.n_samples_per_prompt=4",
        ]
        load_run_config("safe_rlhf", None, overrides)


def test_every_algorithms_default_config_still_loads() -> None:
    for algo in get_registry("algorithms"):
        load_run_config(algo, None, [])
    config = load_run_config("safe_rlhf", None, ["algorithm.advantage_estimator=safe_rlhf"])
    assert config.algorithm.advantage_estimator == "safe_rlhf"
