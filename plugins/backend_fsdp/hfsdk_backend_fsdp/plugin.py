"""Hook implementations of the FSDP backend plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_training_backends(register: Register) -> None:
    """Register the ``fsdp`` training backend, the default for every role kind."""
    from hfsdk_backend_fsdp.fsdp_backend import FSDPBackend
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    register("fsdp", FSDPBackend, config_cls=FSDPRoleConfig, default_for=hfsdk.ROLE_KINDS)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str]:
    """Reject rollout settings that a training run would silently ignore."""
    from hfsdk_backend_fsdp.fsdp_config import run_config_problems

    return run_config_problems(config)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``lora_targets`` (a refusal: a LoRA target the actor's model has no layer of)."""
    from hfsdk_backend_fsdp.lora import check_lora_targets

    register("lora_targets", check_lora_targets)
