"""Hook implementations of the reward-model plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``reward_model`` (reward and cost models)."""
    from hfsdk_reward_model.spec import REWARD_MODEL_SPEC

    register(REWARD_MODEL_SPEC.name, REWARD_MODEL_SPEC)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``rm_pairs`` (every pair tokenized before the run starts)."""
    from hfsdk_reward_model.preflight import check_rm_pairs

    register("rm_pairs", check_rm_pairs)
