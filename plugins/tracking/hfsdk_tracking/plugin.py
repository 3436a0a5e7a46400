"""Hook implementations of the tracking plugin (the sinks sit in :mod:`hfsdk_tracking.sinks`)."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_trackers(register: Register) -> None:
    """Register the metric sinks ``tensorboard`` and ``wandb``."""
    from hfsdk_tracking.sinks import TensorboardSink, WandbSink

    register("tensorboard", TensorboardSink.open, doc=TensorboardSink.__doc__)
    register("wandb", WandbSink.open, doc=WandbSink.__doc__)


@hfsdk.hookimpl
def hfsdk_register_config_sections(register: Register) -> None:
    """Register the ``wandb`` section (project, entity, name and mode of the wandb run)."""
    from hfsdk_tracking.sinks import WandbConfig

    register("wandb", WandbConfig)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """A sink in ``trainer.loggers`` whose package is not installed is refused at load."""
    from hfsdk_tracking.sinks import missing_package_problems

    return missing_package_problems(config.trainer.loggers) or None
