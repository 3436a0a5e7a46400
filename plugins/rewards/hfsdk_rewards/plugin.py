"""Hook implementations of the rewards plugin (the logic sits in the modules beside it)."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_addhooks(pluginmanager: Any) -> None:
    """Add ``hfsdk_register_reward_styles`` (reward call styles of other frameworks)."""
    from hfsdk_rewards import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hfsdk.hookimpl
def hfsdk_register_registry_kinds(register: Register) -> None:
    """Add the kind ``reward_styles`` (``hfsdk list reward-styles``)."""
    register("reward_styles", "hfsdk_register_reward_styles")


@hfsdk.hookimpl
def hfsdk_build_reward_scorer(section: str, config: Any) -> Any:
    """Score a signal section's functions: loaded once, called per batch, weighted, summed."""
    from hfsdk_rewards.scorer import FunctionScorer

    return FunctionScorer(section, config)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``reward_signatures``: every function can be called with the run's columns."""
    from hfsdk_rewards.scorer import check_signatures

    register("reward_signatures", check_signatures)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """Refuse a ``style`` that names no registered reward call style."""
    from hfsdk_rewards.scorer import style_problems

    return style_problems(config)


@hfsdk.hookimpl
def hfsdk_register_commands(cli: Any) -> None:
    """Add ``hfsdk reward score``."""
    from hfsdk_rewards.command import reward

    cli.add_command(reward)


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register ``exact_match``, ``math_verify``, ``format_check``, ``length_penalty``,
    ``code_tests`` and ``remote``."""
    from hfsdk_rewards import builtins, code_tests, math_verify_reward, remote

    # columns=: what they read, so a run (and data inspect) refuses a dataset without it.
    register(
        "exact_match",
        builtins.exact_match,
        config_cls=builtins.ExactMatchConfig,
        columns=lambda config: (config.answer_column,),
    )
    register(
        "math_verify",
        math_verify_reward.math_verify,
        config_cls=math_verify_reward.MathVerifyConfig,
        columns=lambda config: (config.answer_column,),
    )
    register("format_check", builtins.format_check, config_cls=builtins.FormatCheckConfig)
    register("length_penalty", builtins.length_penalty, config_cls=builtins.LengthPenaltyConfig)
    register(
        "code_tests",
        code_tests.code_tests,
        config_cls=code_tests.CodeTestsConfig,
        columns=lambda config: (config.column,),
    )
    register("remote", remote.remote_reward, config_cls=remote.RemoteRewardConfig)
