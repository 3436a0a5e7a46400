"""Hook implementations of the vLLM rollout plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk.hookspecs import Register


@hfsdk.hookimpl
def hfsdk_register_rollout_backends(register: Register) -> None:
    """Register the ``vllm`` rollout backend (vLLM is imported only when one is built)."""
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
    from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout

    register("vllm", VLLMRollout, config_cls=VLLMRolloutConfig)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str]:
    """vLLM not installed, a model it cannot serve, an actor that cannot feed it."""
    from hfsdk_rollout_vllm.checks import run_config_problems

    return run_config_problems(config)
