"""The plugin registers the standard losses, and a run without it says what to install."""

from __future__ import annotations

import pytest

from hfsdk import ConfigError, get_registry, load_run_config
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk_policy_losses.losses import PPOClipConfig, ppo_clip_loss


def test_ppo_clip_is_registered_by_this_plugin_with_its_config() -> None:
    entry = get_registry("policy_losses")["ppo_clip"]
    assert entry.impl is ppo_clip_loss and entry.config_cls is PPOClipConfig
    assert entry.plugin == "policy_losses"


def test_a_run_without_the_plugin_names_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    """GRPO's default loss is ppo_clip: disabled, the line names the distribution to install."""
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "policy_losses")
    reset_plugin_manager()
    try:
        assert "ppo_clip" not in get_registry("policy_losses")
        with pytest.raises(ConfigError) as info:
            load_run_config("grpo", None, [])
    finally:  # the next test sees every installed plugin again
        monkeypatch.delenv("HFSDK_DISABLE_PLUGINS")
        reset_plugin_manager()
    message = str(info.value)
    assert "'algorithm.policy_loss': 'ppo_clip' comes with hfsdk-plugin-policy-losses" in message
    assert "\n" not in message


def test_a_typo_is_still_a_typo() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown policy loss 'ppo_clipp'.*did you mean 'ppo_clip'"
    ):
        load_run_config("grpo", None, ["algorithm.policy_loss=ppo_clipp"])
