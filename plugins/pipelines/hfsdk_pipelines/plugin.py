"""Hook implementations of the generation pipelines: the pipeline the trainer asks for, the
rollout pool's preflight check and the unread ``max_staleness`` warning."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_build_generation_pipeline(
    algorithm: Any,
    loader: Any,
    config: Any,
    rollout: Any,
    restart_rollout: Callable[[BaseException], Any] | None,
) -> Any:
    """A :class:`~hfsdk_pipelines.pipeline.GenerationPipeline` for ``config.trainer.pipeline``."""
    from hfsdk_pipelines.pipeline import build_pipeline

    return build_pipeline(algorithm, loader, config, rollout, restart_rollout)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """A pipeline other than ``sync`` for an algorithm that needs fresh on-policy data, or
    generates nothing: refused with the config (``hfsdk config show`` too), not at the run."""
    from hfsdk_pipelines.pipeline import pipeline_problems

    return pipeline_problems(config)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``rollout_pool`` (the rollout pool's and partial rollouts' settings) and
    ``unread_max_staleness`` (a warning: ``trainer.max_staleness`` set without
    ``trainer.pipeline: async``, which alone reads it)."""
    from hfsdk_pipelines.pipeline import rollout_pool_check, unread_max_staleness

    register("rollout_pool", rollout_pool_check)
    register("unread_max_staleness", unread_max_staleness)
