"""A cosine schedule whose warm-up fills the run is refused with the config, not in a worker."""

from __future__ import annotations

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import ConfigError


def test_cosine_warmup_as_long_as_the_run_is_refused_with_the_config() -> None:
    overrides = [
        "actor.optim.lr_schedule=cosine",
        "actor.optim.warmup_steps=5",
        "trainer.total_steps=5",
    ]
    with pytest.raises(ConfigError) as caught:
        load_run_config("grpo", None, overrides)
    message = str(caught.value)
    assert "actor.optim.lr_schedule is 'cosine'" in message
    assert "trainer.total_steps=5 is not above actor.optim.warmup_steps=5" in message


def test_the_roles_own_total_steps_and_other_trained_roles_are_checked() -> None:
    overrides = [
        "critic.optim.lr_schedule=cosine",
        "critic.optim.warmup_steps=3",
        "critic.optim.total_steps=2",
    ]
    with pytest.raises(ConfigError, match=r"critic\.optim\.total_steps=2 is not above"):
        load_run_config("ppo", None, overrides)


def test_a_cosine_with_steps_left_after_warmup_is_accepted() -> None:
    overrides = [
        "actor.optim.lr_schedule=cosine",
        "actor.optim.warmup_steps=4",
        "trainer.total_steps=5",
    ]
    config = load_run_config("grpo", None, overrides)
    assert config.actor.optim.warmup_steps == 4
    # A constant schedule has no length to fill: any warm-up is fine.
    load_run_config("grpo", None, ["actor.optim.warmup_steps=9", "trainer.total_steps=5"])


def test_the_warmup_help_says_what_the_schedule_does() -> None:
    """Iteration 0 trains at lr/W, not at 0 (the help once said "from 0 to lr")."""
    import attrs

    from hfsdk_backend_common.lr_schedule import LRMultiplier
    from hfsdk_backend_common.optim_config import OptimConfig

    help_text = attrs.fields(OptimConfig).warmup_steps.metadata["help"]
    assert "lr·(s+1)/warmup_steps" in help_text
    multiplier = LRMultiplier(warmup_steps=4, schedule="constant", total_steps=0, min_lr_ratio=0)
    assert [multiplier(s) for s in range(4)] == [(s + 1) / 4 for s in range(4)]
