"""Hook implementations of the SFT plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_algorithms(register: Register) -> None:
    """Register ``sft``."""
    from hfsdk_sft.spec import SFT_SPEC

    register(SFT_SPEC.name, SFT_SPEC)


@hfsdk.hookimpl
def hfsdk_register_policy_losses(register: Register) -> None:
    """Register ``nll`` (the negative log-likelihood of the masked tokens)."""
    from hfsdk_sft.losses import NLLConfig, nll_loss

    register("nll", nll_loss, config_cls=NLLConfig)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``sft_rows`` (every row tokenized before the run starts)."""
    from hfsdk_sft.preflight import check_sft_rows

    register("sft_rows", check_sft_rows)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str]:
    """No reference KL loss (SFT has no reference role)."""
    from hfsdk_sft.validation import sft_config_problems

    return sft_config_problems(config)
