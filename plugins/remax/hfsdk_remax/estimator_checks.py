"""Config checks of the ``remax`` estimator (torch-free: they run when a config loads)."""

from __future__ import annotations

from typing import Any

GREEDY = "greedy_generation"
"""The extra generation whose rewards are ReMax's baselines (``REMAX_SPEC``)."""


def baseline_problems(config: Any) -> list[str] | None:
    """``algorithm.advantage_estimator: remax`` for a program that generates no greedy
    baseline: before, the run failed only at the first advantage, after loading its models,
    generating and scoring."""
    from hfsdk import run_spec

    if getattr(config.sections.get("algorithm"), "advantage_estimator", None) != "remax":
        return None
    spec = run_spec(config)
    if GREEDY in spec.extra_generations:
        return None
    return [
        f"algorithm.advantage_estimator=remax needs the reward of a greedy response per prompt "
        f"as its baseline, which algorithm {spec.name!r} does not generate; use --algo remax, "
        "or another estimator (grpo, rloo)"
    ]
