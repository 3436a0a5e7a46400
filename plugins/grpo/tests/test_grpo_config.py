"""GRPO's config checks across sections."""

from __future__ import annotations

import pytest

from hfsdk import ConfigError
from hfsdk.core.config import load_run_config


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "reinforce_plus_plus_baseline"])
def test_a_group_of_one_sample_is_refused_for_group_relative_estimators(estimator: str) -> None:
    # Before: accepted; every advantage was 0 and the run trained nothing, silently.
    settings = ["algorithm.n_samples_per_prompt=1", f"algorithm.advantage_estimator={estimator}"]
    with pytest.raises(
        ConfigError, match=f"n_samples_per_prompt=1 with advantage_estimator '{estimator}'"
    ):
        load_run_config("grpo", None, settings)
    load_run_config(
        "grpo", None, [*settings[:1], "algorithm.advantage_estimator=reinforce_plus_plus"]
    )
    load_run_config("grpo", None, ["algorithm.n_samples_per_prompt=2", settings[1]])
