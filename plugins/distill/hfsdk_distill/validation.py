"""Cross-section checks of a run of a distillation spec (``distill`` or one derived from it)."""

from __future__ import annotations

from typing import Any

from hfsdk import get_registry
from hfsdk_distill.distill_config import DistillConfig
from hfsdk_distill.routing import routing_problems


def distill_config_problems(config: Any) -> list[str]:
    """One line per problem; none for runs of other algorithms."""
    algo = config.algorithm
    if not isinstance(algo, DistillConfig):
        return []
    spec = get_registry("algorithms")[config.algo].impl
    teachers = spec.roles_of_kind("frozen_policy")
    problems = routing_problems(algo.teacher_routes, algo.default_teacher, teachers)
    if algo.kl_in_reward or algo.kl_loss_coef > 0:
        problems.append(
            "algorithm.kl_in_reward / kl_loss_coef: distillation has no reference role (the "
            "teachers are not references); the reverse KL to the teacher is already the "
            "advantage — set kl_in_reward: false and kl_loss_coef: 0"
        )
    return problems
