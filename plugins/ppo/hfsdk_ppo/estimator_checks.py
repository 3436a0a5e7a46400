"""Config checks of the ``gae`` estimator (torch-free: they run when a config loads)."""

from __future__ import annotations

from typing import Any


def critic_problems(config: Any) -> list[str] | None:
    """``algorithm.advantage_estimator: gae`` for an algorithm with no critic: before, the run
    loaded its models, generated and scored, and only then failed at the first advantage."""
    from hfsdk import run_spec

    if getattr(config.sections.get("algorithm"), "advantage_estimator", None) != "gae":
        return None
    spec = run_spec(config)
    if spec.roles_of_kind("value"):
        return None
    return [
        f"algorithm.advantage_estimator=gae needs a critic's values, but algorithm {spec.name!r} "
        "has no critic (a role of kind 'value'); use a critic-free estimator such as grpo, or "
        "--algo ppo"
    ]
