"""Trainer settings that mean nothing are refused when the config is built."""

from __future__ import annotations

import math

import pytest

from hfsdk.core.trainer.trainer_config import TrainerConfig


@pytest.mark.parametrize("seconds", [math.inf, math.nan, 0.0, -1.0])
def test_worker_timeout_s_is_a_finite_positive_number(seconds: float) -> None:
    # No "no limit" value is documented: inf would only arm deadlines that never fire.
    with pytest.raises(ValueError, match="'worker_timeout_s' must be"):
        TrainerConfig(worker_timeout_s=seconds)
    assert TrainerConfig(worker_timeout_s=1e10).worker_timeout_s == 1e10
