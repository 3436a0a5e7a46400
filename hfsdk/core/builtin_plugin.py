"""Hook implementations that ship with the core (always registered).

Entries that belong to no single algorithm or backend live here.
"""

from __future__ import annotations

import hfsdk
from hfsdk.hookspecs import Register


@hfsdk.hookimpl
def hfsdk_register_kl_estimators(register: Register) -> None:
    """Register the KL estimators (``k1``, ``abs``, ``k2``, ``k3``, ``k3_clamped``, ...)."""
    from hfsdk.core.maths.kl_estimators import KL_ESTIMATORS

    for name, fn in KL_ESTIMATORS.items():
        register(name, fn)


@hfsdk.hookimpl
def hfsdk_register_policy_losses(register: Register) -> None:
    """Register ``ppo_clip`` (asymmetric clip ratios, dual clip) and ``reinforce``."""
    from hfsdk.core.maths.policy_losses import (
        PPOClipConfig,
        ReinforceConfig,
        ppo_clip_loss,
        reinforce_loss,
    )

    register("ppo_clip", ppo_clip_loss, config_cls=PPOClipConfig)
    register("reinforce", reinforce_loss, config_cls=ReinforceConfig)


@hfsdk.hookimpl
def hfsdk_register_rollout_corrections(register: Register) -> None:
    """Register ``tis``, ``mis``, ``icepop``, ``geo_rs``, ``k3_rs``, ``trust_region`` and
    ``dsv32_mask``."""
    from hfsdk.core.maths.rollout_corrections import BUILTIN_CORRECTIONS

    for name, (fn, config_cls) in BUILTIN_CORRECTIONS.items():
        register(name, fn, config_cls=config_cls)


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register ``exact_match``, ``math_verify``, ``format_check``, ``length_penalty``,
    ``code_tests``, ``remote`` and the default task's."""
    from hfsdk.core import default_task
    from hfsdk.core.rewards import builtins, code_tests, math_verify_reward, remote

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
    register(default_task.REWARD_FUNCTION_NAME, default_task.default_task_reward)
    register(default_task.COST_FUNCTION_NAME, default_task.default_task_cost)


@hfsdk.hookimpl
def hfsdk_register_transfer_protocols(register: Register) -> None:
    """Register the built-in transfer protocols (``one_to_all`` ... ``pp_as_dp``)."""
    from hfsdk.core.workers.protocols.builtins import BUILTIN_PROTOCOLS

    for name, protocol in BUILTIN_PROTOCOLS.items():
        register(name, protocol, doc=protocol.doc)


@hfsdk.hookimpl
def hfsdk_register_clusters(register: Register) -> None:
    """Register the cluster presets ``a100-80gb``, ``h100-80gb``, ``h200-141gb`` and ``local``."""
    from hfsdk.core.placement.cluster import PRESETS

    for name, factory in PRESETS.items():
        register(name, factory)


@hfsdk.hookimpl
def hfsdk_register_config_sections(register: Register) -> None:
    """Register the core's sections ``trainer``, ``data``, ``placement``, ``rollout_correction``
    and ``sandbox``."""
    from hfsdk.core.data.data_config import DataConfig
    from hfsdk.core.maths.rollout_correction_config import RolloutCorrectionConfig
    from hfsdk.core.sandbox.sandbox_config import SandboxConfig
    from hfsdk.core.trainer.placement_config import PlacementConfig
    from hfsdk.core.trainer.trainer_config import TrainerConfig

    register("trainer", TrainerConfig)
    register("data", DataConfig)
    register("placement", PlacementConfig)
    register("rollout_correction", RolloutCorrectionConfig)
    register("sandbox", SandboxConfig)


@hfsdk.hookimpl
def hfsdk_register_step_observers(register: Register) -> None:
    """Register ``faults`` (``HFSDK_FAULT_INJECT``), ``rollout_dump`` (``trainer.rollout_dump``)
    and ``predicted_step`` (the planner's ``perf/predicted_step_s``)."""
    from hfsdk.core.placement.run_plan import prediction_observer
    from hfsdk.core.trainer.faults import fault_observer
    from hfsdk.core.trainer.rollout_dump import rollout_dump_observer

    register("faults", fault_observer)
    register("rollout_dump", rollout_dump_observer)
    register("predicted_step", prediction_observer)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``run_memory`` (the planner's memory model against this machine) and
    ``sandbox_notice`` (model code that would be refused or weakly isolated)."""
    from hfsdk.core.sandbox.preflight import sandbox_preflight
    from hfsdk.core.trainer.preflight import run_memory_check

    register("run_memory", run_memory_check)
    register("sandbox_notice", sandbox_preflight)
