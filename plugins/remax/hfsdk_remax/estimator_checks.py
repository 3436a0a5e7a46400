"""Config checks of the ``remax`` estimator and algorithm (torch-free: they run when a config
loads)."""

from __future__ import annotations

from typing import Any

GREEDY = "greedy_generation"
"""The extra generation whose rewards are ReMax's baselines (``REMAX_SPEC``)."""

ESTIMATOR = "remax"
"""The advantage estimator's registered name (and the algorithm's default)."""


def baseline_problems(config: Any) -> list[str] | None:
    """``algorithm.advantage_estimator: remax`` for a program that generates no greedy
    baseline: before, the run failed only at the first advantage, after loading its models,
    generating and scoring. And another estimator under the ``remax`` program, whose greedy
    generation and its scoring would then run every step for nothing."""
    from hfsdk import run_spec
    from hfsdk_remax.remax_algorithm import ReMaxAlgorithm

    # getattr: not every algorithm's config has an estimator (reward_model's has none).
    estimator = getattr(config.sections.get("algorithm"), "advantage_estimator", None)
    if estimator is None:
        return None
    spec = run_spec(config)
    if issubclass(spec.program, ReMaxAlgorithm):
        if estimator == ESTIMATOR:
            return None
        # The step generates and scores a greedy response per prompt whatever the estimator;
        # only remax reads those rewards (as reward_baselines).
        return [
            f"algorithm.advantage_estimator={estimator} with algorithm {spec.name!r}: its "
            "step generates and scores a greedy response per prompt as the baseline, which "
            f"only the {ESTIMATOR} estimator reads, so the greedy baseline would be generated "
            f"and unused; remove algorithm.advantage_estimator ({ESTIMATOR} is the default), "
            f"or use --algo {_algorithm_of(estimator)} for that estimator"
        ]
    if estimator != ESTIMATOR:
        return None
    if GREEDY in spec.extra_generations:
        return None
    return [
        f"algorithm.advantage_estimator=remax needs the reward of a greedy response per prompt "
        f"as its baseline, which algorithm {spec.name!r} does not generate; use --algo remax, "
        "or another estimator (grpo, rloo)"
    ]


def _algorithm_of(estimator: str) -> str:
    """The registered algorithm to suggest for ``estimator``: grpo, unless another algorithm
    has it as its default and grpo does not (gae: ppo, which has the critic it needs)."""
    import attrs

    from hfsdk import get_registry

    algorithms = get_registry("algorithms")
    matches = []
    for name in algorithms:
        config_cls = algorithms[name].impl.config_cls
        field = attrs.fields_dict(config_cls).get("advantage_estimator")
        if field is not None and field.default == estimator:
            matches.append(name)
    return "grpo" if "grpo" in matches or not matches else matches[0]
