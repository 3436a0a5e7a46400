"""Hook implementations of the rollout corrections: the corrections, the ``rollout_correction``
section, its validation, the behaviour log-probs it needs and the mismatch metrics."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_addhooks(pluginmanager: Any) -> None:
    """Add ``hfsdk_register_rollout_corrections`` (the corrections' registry hook)."""
    from hfsdk_rollout_corrections import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hfsdk.hookimpl
def hfsdk_register_registry_kinds(register: Register) -> None:
    """Add the kind ``rollout_corrections`` (``hfsdk list rollout-corrections``)."""
    register("rollout_corrections", "hfsdk_register_rollout_corrections")


@hfsdk.hookimpl
def hfsdk_register_rollout_corrections(register: Register) -> None:
    """Register ``tis``, ``mis``, ``icepop``, ``geo_rs``, ``k3_rs``, ``trust_region`` and
    ``dsv32_mask``."""
    # Here, not at import: the corrections import torch, and `hfsdk plugins` stays fast.
    from hfsdk_rollout_corrections.corrections import STANDARD_CORRECTIONS

    for name, (fn, config_cls) in STANDARD_CORRECTIONS.items():
        register(name, fn, config_cls=config_cls)


@hfsdk.hookimpl
def hfsdk_register_config_sections(register: Register) -> None:
    """Register the ``rollout_correction`` section (``preset``, ``apply``)."""
    from hfsdk_rollout_corrections.section import RolloutCorrectionConfig

    register("rollout_correction", RolloutCorrectionConfig)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """The algorithm samples what they correct, the corrections the config names exist and
    their settings are valid, and the rollout gives the log-probs they read (one line if not)."""
    from hfsdk_rollout_corrections.section import (
        behaviour_source_problems,
        resolve_rollout_corrections,
        sampleless_problems,
    )

    # First: no backend or setting would help a run that samples nothing.
    if problems := sampleless_problems(config):
        return problems
    try:
        resolve_rollout_corrections(config, hfsdk.get_registry("rollout_corrections"))
    except hfsdk.ConfigError as exc:
        return [str(exc)]
    return behaviour_source_problems(config, hfsdk.get_registry("rollout_backends"))


@hfsdk.hookimpl
def hfsdk_behaviour_log_probs_needed(config: Any) -> bool | None:
    """``True`` when a correction or ``trainer.max_mismatch_kl`` reads ``rollout_log_probs``."""
    from hfsdk_rollout_corrections.section import behaviour_log_probs_needed

    # None, not False: another plugin may still need them.
    return True if behaviour_log_probs_needed(config) else None


@hfsdk.hookimpl
def hfsdk_register_step_observers(register: Register) -> None:
    """Register ``mismatch`` (the ``mismatch/*`` metrics that ``trainer.max_mismatch_kl`` reads)."""
    from hfsdk_rollout_corrections.mismatch import mismatch_observer

    register("mismatch", mismatch_observer)
