"""Hook implementations of the megatron-core backend plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk.hookspecs import Register


@hfsdk.hookimpl
def hfsdk_register_training_backends(register: Register) -> None:
    """Register the ``megatron`` training backend."""
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig
    from hfsdk_backend_megatron.megatron_worker import MegatronWorker

    register("megatron", MegatronWorker, config_cls=MegatronRoleConfig)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str]:
    """Layouts that cannot shard the model, and models the converter does not know."""
    from hfsdk_backend_megatron.validation import run_config_problems

    return run_config_problems(config)
