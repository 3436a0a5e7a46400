"""Cross-section checks of a run of a distillation spec (``distill`` or one derived from it)."""

from __future__ import annotations

from typing import Any

from hfsdk import get_registry
from hfsdk_distill.distill_config import DistillConfig
from hfsdk_distill.routing import routing_problems, weight_problems


def distill_config_problems(config: Any) -> list[str]:
    """One line per problem; none for runs of other algorithms."""
    algo = config.algorithm
    if not isinstance(algo, DistillConfig):
        return []
    spec = get_registry("algorithms")[config.algo].impl
    teachers = spec.roles_of_kind("frozen_policy")
    problems = routing_problems(algo.teacher_routes, algo.default_teacher, teachers)
    problems += weight_problems(algo.teacher_weights, teachers)
    if algo.teacher_weights and algo.teacher_routes:
        problems.append(
            "algorithm.teacher_weights and algorithm.teacher_routes are both set: a row is "
            "either scored by a weighted mixture of every teacher or routed to one; keep one"
        )
    if algo.teacher_weights and algo.top_k:
        problems.append(
            f"algorithm.top_k={algo.top_k} with algorithm.teacher_weights: the teachers' top-k "
            "tokens differ, so their mixture has no top-k to ship; use one teacher per row "
            "(teacher_routes) for top-k, or set top_k: 0"
        )
    if algo.kl_in_reward or algo.kl_loss_coef > 0:
        problems.append(
            "algorithm.kl_in_reward / kl_loss_coef: distillation has no reference role (the "
            "teachers are not references); the reverse KL to the teacher is already the "
            "advantage — set kl_in_reward: false and kl_loss_coef: 0"
        )
    return problems
