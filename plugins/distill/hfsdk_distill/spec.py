"""The ``distill`` algorithm as the SDK sees it: roles, config, program, default-task preset."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from hfsdk import AlgorithmSpec, RoleSpec
from hfsdk_distill.distill_algorithm import DistillAlgorithm
from hfsdk_distill.distill_config import DistillConfig
from hfsdk_distill.objective import distill_actor_objective
from hfsdk_distill.student import student_model_path, teacher_model_path
from hfsdk_distill.teachers import configure_teachers

DISTILL_SPEC = AlgorithmSpec(
    name="distill",
    program=DistillAlgorithm,
    config_cls=DistillConfig,
    actor_objective=distill_actor_objective,
    # algorithm.teachers names the run's teacher roles (one frozen role each).
    configure=configure_teachers,
    roles=(
        RoleSpec(name="actor", kind="policy"),
        # A frozen policy with its own model_path (any size, any backend, same tokenizer).
        RoleSpec(name="teacher", kind="frozen_policy"),
        RoleSpec(name="reward", kind="scorer"),
    ),
    summary=(
        "On-policy distillation: the student samples, a frozen teacher scores its tokens; the "
        "per-token reverse KL is the advantage"
    ),
    preset={
        "rollout": {"max_response_length": 8},
        "algorithm": {"n_samples_per_prompt": 4},
        # Deferred: the models are built (once, cached) only when the default task runs.
        "actor": {
            "model_path": student_model_path,
            # Seeds 0-2 measured at 1e-4 and 3e-4: 3e-4 lowered the reverse KL by more.
            "optim": {"lr": 3e-4},
            "mini_batch_size": 64,
            "micro_batch_size": 64,
        },
        "teacher": {"model_path": teacher_model_path, "forward_micro_batch_size": 64},
    },
)


def multi_teacher_spec(name: str, teachers: Sequence[str]) -> AlgorithmSpec:
    """The ``distill`` program with one ``frozen_policy`` role per name in ``teachers``.

    Each teacher is a config section of its own (``<teacher>.model_path``, backend,
    batch sizes); ``algorithm.teacher_routes`` sends each row to one of them (by
    ``algorithm.route_key``), or ``algorithm.teacher_weights`` has every row scored by
    a weighted mixture. On the default task every teacher is the warm-started model.
    Register the result with ``hfsdk_register_algorithms`` to get ``--algo <name>``.
    """
    if len(set(teachers)) != len(teachers) or not teachers:
        raise ValueError(f"teachers must be distinct role names, at least one; got {teachers!r}")
    actor, _teacher, reward = DISTILL_SPEC.roles
    preset = {key: value for key, value in DISTILL_SPEC.preset.items() if key != "teacher"}
    for teacher in teachers:
        preset[teacher] = DISTILL_SPEC.preset["teacher"]
    return attrs.evolve(
        DISTILL_SPEC,
        name=name,
        roles=(actor, *(RoleSpec(name=t, kind="frozen_policy") for t in teachers), reward),
        summary=f"On-policy distillation from {len(teachers)} teachers, routed per row or mixed",
        preset=preset,
    )


DISTILL_MULTI_SPEC = multi_teacher_spec("distill_multi", ("teacher", "teacher_2"))
"""Two teachers: ``teacher_routes`` by a dataset column, or ``teacher_weights`` (a mixture)."""
