"""Hook implementations of the standard-rewards plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


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
    register("code_tests", code_tests.code_tests, config_cls=code_tests.CodeTestsConfig)
    register("remote", remote.remote_reward, config_cls=remote.RemoteRewardConfig)
