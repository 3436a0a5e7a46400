"""Hook implementations of the standard rollout corrections."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_rollout_corrections(register: Register) -> None:
    """Register ``tis``, ``mis``, ``icepop``, ``geo_rs``, ``k3_rs``, ``trust_region`` and
    ``dsv32_mask``."""
    # Here, not at import: the corrections import torch, and `hfsdk plugins` stays fast.
    from hfsdk_rollout_corrections.corrections import STANDARD_CORRECTIONS

    for name, (fn, config_cls) in STANDARD_CORRECTIONS.items():
        register(name, fn, config_cls=config_cls)
