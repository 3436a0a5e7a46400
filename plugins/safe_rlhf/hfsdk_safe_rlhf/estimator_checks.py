"""Config checks of the ``safe_rlhf`` estimator and algorithm (torch-free: they run when a
config loads). Each mismatch used to pass the load and fail only at the first advantage,
after the run had loaded its models, generated and scored."""

from __future__ import annotations

from typing import Any

ESTIMATOR = "safe_rlhf"
"""The advantage estimator's registered name (and the algorithm's default)."""

COST_SCORER = "cost"
"""The scorer role whose scores are the costs (``SAFE_RLHF_SPEC``)."""


def estimator_problems(config: Any) -> list[str] | None:
    """The ``safe_rlhf`` estimator outside a run with two critics and a cost scorer, and
    another estimator under the ``safe_rlhf`` program, as ``hfsdk_validate_config`` messages."""
    from hfsdk import run_spec
    from hfsdk_safe_rlhf.safe_rlhf_algorithm import SafeRLHFAlgorithm

    # getattr: not every algorithm's config has an estimator (reward_model's has none).
    estimator = getattr(config.sections.get("algorithm"), "advantage_estimator", None)
    if estimator is None:
        return None
    spec = run_spec(config)
    if issubclass(spec.program, SafeRLHFAlgorithm):
        if estimator == ESTIMATOR:
            return None
        # Its step combines reward and cost advantages with λ and trains the cost critic on
        # extras['cost_returns']: only the safe_rlhf estimator computes them.
        return [
            f"algorithm.advantage_estimator={estimator} cannot drive algorithm {spec.name}: "
            "its step needs the reward and cost advantages combined "
            "with the Lagrange multiplier and the cost critic's returns "
            "(extras['cost_returns']), which only the safe_rlhf estimator computes; remove "
            f"algorithm.advantage_estimator (safe_rlhf is the default), or use {estimator} "
            "with an algorithm without a cost (ppo, grpo)"
        ]
    if estimator != ESTIMATOR:
        return None
    critics = spec.roles_of_kind("value")
    if len(critics) >= 2 and COST_SCORER in spec.roles_of_kind("scorer"):
        return None
    return [
        "algorithm.advantage_estimator=safe_rlhf needs a reward critic's and a cost "
        "critic's values, the cost model's scores and the Lagrange multiplier λ (two roles "
        f"of kind 'value' and a {COST_SCORER!r} scorer), which algorithm {spec.name!r} does "
        f"not have (its value roles: {', '.join(critics) or 'none'}); use --algo safe_rlhf, or "
        "another estimator (gae with a critic, grpo without)"
    ]
