"""Hook implementations of the DPO plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``dpo``."""
    from hfsdk_dpo.spec import DPO_SPEC

    register(DPO_SPEC.name, DPO_SPEC)


@hfsdk.hookimpl
def hfsdk_register_policy_losses(register: Register) -> None:
    """Register ``dpo`` (sigmoid DPO against the reference's log-probs)."""
    from hfsdk_dpo.losses import DPOLossConfig, dpo_loss

    register("dpo", dpo_loss, config_cls=DPOLossConfig)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``dpo_pairs`` (every pair tokenized before the run starts)."""
    from hfsdk_dpo.preflight import check_dpo_pairs

    register("dpo_pairs", check_dpo_pairs)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str]:
    """Only the dpo loss; no advantage estimator or sampling, reward-KL or aggregation settings."""
    from hfsdk_dpo.validation import dpo_config_problems

    return dpo_config_problems(config)
