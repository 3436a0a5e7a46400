"""Hook implementations of the example algorithm plugin (entry point ``algo_example``)."""

from __future__ import annotations

import hfsdk


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: hfsdk.Register) -> None:
    """Register ``reinforce_mean``."""
    from hfsdk_algo_example.spec import REINFORCE_MEAN_SPEC

    register(REINFORCE_MEAN_SPEC.name, REINFORCE_MEAN_SPEC)


@hfsdk.hookimpl
def hfsdk_register_advantage_estimators(register: hfsdk.Register) -> None:
    """Register ``batch_mean`` (score minus the batch's mean score)."""
    from hfsdk_algo_example.advantages import BatchMeanConfig, compute_batch_mean_advantages

    register("batch_mean", compute_batch_mean_advantages, config_cls=BatchMeanConfig)
