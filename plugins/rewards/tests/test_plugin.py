"""The plugin registers each standard reward function under its name, with its config class."""

from __future__ import annotations

from hfsdk_rewards.builtins import ExactMatchConfig, exact_match
from hfsdk_rewards.code_tests import CodeTestsConfig, code_tests
from hfsdk_rewards.loading import resolve_reward_function


def test_registry_names_resolve_to_the_plugins_functions() -> None:
    resolved = resolve_reward_function("exact_match")
    assert resolved.fn is exact_match and resolved.config_cls is ExactMatchConfig
    resolved = resolve_reward_function("code_tests")
    assert resolved.fn is code_tests and resolved.config_cls is CodeTestsConfig


def test_every_standard_reward_is_owned_by_this_plugin() -> None:
    import hfsdk

    registry = hfsdk.get_registry("reward_functions")
    names = ("exact_match", "format_check", "length_penalty", "math_verify", "code_tests", "remote")
    assert {registry[name].plugin for name in names} == {"rewards"}
