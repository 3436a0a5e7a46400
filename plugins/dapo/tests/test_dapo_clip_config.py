"""``dapo_clip``'s bounds are validated like ``ppo_clip``'s: each bad value is one line."""

from __future__ import annotations

import pytest

from hfsdk import ConfigError
from hfsdk.core.config import load_run_config


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("policy_loss.clip_ratio_c=0.5", "clip_ratio_c"),
        ("policy_loss.clip_ratio_c=1.0", "clip_ratio_c"),
        ("policy_loss.clip_ratio_low=1.0", "clip_ratio_low"),
        ("policy_loss.clip_ratio_low=1.5", "clip_ratio_low"),
    ],
)
def test_bounds_that_zero_gradients_are_refused(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key) as info:
        load_run_config("dapo", None, [override])
    assert "\n" not in str(info.value)


def test_a_dual_clip_above_one_is_accepted() -> None:
    config = load_run_config("dapo", None, ["policy_loss.clip_ratio_c=3.0"])
    assert config.policy_loss.clip_ratio_c == 3.0
