"""``gae`` is refused when the config loads for an algorithm without a critic."""

from __future__ import annotations

import pytest

from hfsdk import ConfigError
from hfsdk.core.config import load_run_config


@pytest.mark.parametrize("algo", ["grpo", "dapo"])
def test_gae_without_a_critic_is_refused_when_the_config_loads(algo: str) -> None:
    # Before: accepted; the run failed at step 1, after loading, generating and scoring.
    with pytest.raises(ConfigError, match=rf"gae needs a critic's values, but algorithm '{algo}'"):
        load_run_config(algo, None, ["algorithm.advantage_estimator=gae"])


def test_gae_with_a_critic_loads() -> None:
    assert load_run_config("ppo").sections["algorithm"].advantage_estimator == "gae"
