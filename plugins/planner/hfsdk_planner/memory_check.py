"""The memory preflight: warn before a run starts when the memory model says it will not fit."""

from __future__ import annotations

import logging
from typing import Any

from hfsdk import HfsdkError
from hfsdk_planner.run_memory import host_memory_bytes, memory_warning, run_memory

logger = logging.getLogger(__name__)


def run_memory_warning(
    config: Any, *, device_bytes: float | None = None, host_bytes: float | None = None
) -> str | None:
    """One line when the planner's memory model says the run will not fit this machine.

    Compared per GPU when the roles compute on CUDA (``device_bytes`` defaults
    to device 0's memory), otherwise against the host's available memory summed
    over the pools' virtual devices (``host_bytes`` defaults to ``MemAvailable``).
    An estimate that cannot be made (an unreadable model config) warns nothing.
    """
    try:
        pools = run_memory(config)
    except (HfsdkError, KeyError, ValueError, OSError) as exc:
        logger.debug("no memory estimate for this run: %s", exc)
        return None
    if device_bytes is None and host_bytes is None:
        import torch

        if config.trainer.device != "cpu" and torch.cuda.is_available():
            device_bytes = float(torch.cuda.get_device_properties(0).total_memory)
        else:
            found = host_memory_bytes()
            host_bytes = float(found) if found is not None else None
    return memory_warning(pools, device_bytes=device_bytes, host_bytes=host_bytes)


def memory_preflight(config: Any, spec: Any, prepared: Any) -> str | None:
    """The ``run_memory`` preflight check: a warning line, never a refusal (an estimate
    that is tight must not stop a run that may fit)."""
    return run_memory_warning(config)
