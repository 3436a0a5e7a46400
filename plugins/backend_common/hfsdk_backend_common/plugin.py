"""Hook implementations of the shared backend package: the ``hf`` rollout, ``llm_judge``, the
half-precision-on-CPU preflight warning, the model-positions and shared-tokenizer checks."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_rollout_backends(register: Register) -> None:
    """Register the ``hf`` rollout backend (any training backend's actor), the default one."""
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig

    register("hf", HFRollout, config_cls=HFRolloutConfig, default=True)


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register ``llm_judge`` (a local model's verdict through a rollout backend)."""
    from hfsdk_backend_common.judge import JudgeConfig, llm_judge, template_columns

    # columns=: the template's dataset columns, so a run (and data inspect) refuses a
    # dataset without one before it starts.
    register(
        "llm_judge",
        llm_judge,
        config_cls=JudgeConfig,
        columns=lambda config: template_columns(config.template),
    )


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``half_precision_on_cpu`` (a warning: bf16/fp16 emulated on this CPU),
    ``model_dirs`` (a refusal: a model or tokenizer path that is no local directory of one),
    ``model_positions`` (a refusal: prompt + response beyond a model's positions),
    ``shared_tokenizer`` (a refusal: a reference, teacher or critic with another tokenizer),
    ``unused_kl_loss`` (a warning: KL settings that kl_in_reward, true or false, ignores) and
    ``unused_lora_settings`` (a warning: ``lora`` settings beside ``rank: 0``, which ignores
    them)."""
    from hfsdk_backend_common.lora_config import unused_lora_settings
    from hfsdk_backend_common.model_dirs_check import check_model_dirs
    from hfsdk_backend_common.objectives import unused_kl_loss
    from hfsdk_backend_common.positions_check import check_model_positions
    from hfsdk_backend_common.precision_check import half_precision_on_cpu
    from hfsdk_backend_common.tokenizer_check import check_shared_tokenizer

    register("half_precision_on_cpu", half_precision_on_cpu)
    register("model_dirs", check_model_dirs)
    register("model_positions", check_model_positions)
    register("shared_tokenizer", check_shared_tokenizer)
    register("unused_kl_loss", unused_kl_loss)
    register("unused_lora_settings", unused_lora_settings)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """An ``algorithm.loss_agg_mode`` the actor cannot aggregate with (an algorithm's config
    class that redeclares the field drops the core's validator), an adaptive KL controller
    starting at ``kl_coef: 0``, and a trained role's cosine schedule whose warm-up is not
    shorter than the run."""
    from hfsdk_backend_common.objectives import adaptive_kl_problems, loss_agg_mode_problems
    from hfsdk_backend_common.optim_config import schedule_problems

    return (
        (loss_agg_mode_problems(config) or [])
        + (adaptive_kl_problems(config) or [])
        + schedule_problems(config)
    )
