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


def test_code_tests_columns_are_checked_before_the_run() -> None:
    # Without columns= a dataset lacking the test-case column passed the pre-run check and
    # every sample scored 0 as bad_tests.
    from hfsdk_rewards.scorer import FunctionScorer

    scorer = FunctionScorer("reward", {"functions": [{"name": "code_tests"}]})
    assert scorer.signature_problem(["prompt", "ground_truth"]) is None
    renamed = {"name": "code_tests", "kwargs": {"column": "tests"}}
    problem = FunctionScorer("reward", {"functions": [renamed]}).signature_problem(
        ["prompt", "ground_truth"]
    )
    assert problem is not None
    assert "'code_tests' reads the dataset column 'tests', which the dataset lacks" in problem
    assert "set kwargs: {column: ground_truth}" in problem
