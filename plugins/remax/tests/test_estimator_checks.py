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
