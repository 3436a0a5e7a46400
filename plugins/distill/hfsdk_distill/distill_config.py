"""Configuration of on-policy distillation (the ``algorithm`` section of ``--algo distill``)."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig, help_field


@attrs.frozen(kw_only=True)
class DistillConfig(AlgorithmConfig):
    """On-policy distillation: the student samples, frozen teachers score its tokens."""

    advantage_estimator: str = "reverse_kl"
    policy_loss: str = "ppo_clip"
    distill_coef: float = help_field(
        "Weight of the per-token teacher-minus-student log-prob (minus the sampled reverse KL"
        " KL(student‖teacher)) in the advantage.",
        default=1.0,
        validator=attrs.validators.ge(0.0),
    )
    reward_weight: float = help_field(
        "Weight of the task reward in the advantage: reward_weight·(score − mean score of the "
        "prompt's group, or of the batch for groups of one); 0 distills only.",
        default=0.0,
        validator=attrs.validators.ge(0.0),
    )
    teacher_routes: dict[str, str] = help_field(
        "data_source value → the teacher role that scores its rows ({math: teacher, code: "
        "teacher_code}); rows of other sources go to default_teacher. Empty: every row to it.",
        factory=dict,
    )
    default_teacher: str | None = help_field(
        "The teacher role for rows whose data_source teacher_routes does not name (null: the "
        "spec's first teacher; set teacher_routes for every source and this to '' to refuse "
        "unrouted rows).",
        default=None,
    )
