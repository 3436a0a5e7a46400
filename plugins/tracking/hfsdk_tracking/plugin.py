"""Hook implementations of the tracking plugin (the sinks sit in :mod:`hfsdk_tracking.sinks`)."""

from __future__ import annotations

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
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``sink_packages``: a run whose ``trainer.loggers`` names a sink whose package
    is not installed stops before any worker starts (commands that only read a config,
    ``config show``, ``export``, ``replay``, need no sink)."""
    from hfsdk_tracking.sinks import sink_packages_check

    register("sink_packages", sink_packages_check)
