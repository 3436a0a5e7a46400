"""Hook implementations of the megatron-core backend plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_training_backends(register: Register) -> None:
    """Register the ``megatron`` training backend (config only for now)."""
    from hfsdk_backend_megatron.megatron_backend import MegatronBackend
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig

    register("megatron", MegatronBackend, config_cls=MegatronRoleConfig)
