"""``remax`` is refused when the config loads for a program that makes no greedy baseline."""

from __future__ import annotations

import pytest

from hfsdk import ConfigError
from hfsdk.core.config import load_run_config


def test_remax_estimator_without_greedy_baselines_is_refused_when_the_config_loads() -> None:
    # Before: accepted; the run failed at step 1, after loading, generating and scoring.
    with pytest.raises(ConfigError, match=r"remax needs the reward of a greedy response"):
        load_run_config("grpo", None, ["algorithm.advantage_estimator=remax"])
    assert load_run_config("remax").sections["algorithm"].advantage_estimator == "remax"


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_remax_with_another_estimator_is_refused_when_the_config_loads(estimator: str) -> None:
    # Before: accepted; every step generated and scored the greedy baseline, then dropped it.
    with pytest.raises(
        ConfigError, match=rf"advantage_estimator={estimator} .*generated and unused.*--algo grpo"
    ) as caught:
        load_run_config("remax", None, [f"algorithm.advantage_estimator={estimator}"])
    assert "\n" not in str(caught.value)


def test_remax_and_its_documented_settings_still_load() -> None:
    assert load_run_config("remax", None, ["algorithm.advantage_estimator=remax"]).algo == "remax"
    assert load_run_config("remax", None, ["algorithm.kl_in_reward=false"]).algo == "remax"
