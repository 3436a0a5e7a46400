"""Configuration of on-policy distillation (the ``algorithm`` section of ``--algo distill``)."""

from __future__ import annotations

from typing import Literal

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
    teachers: dict[str, str] = help_field(
        "data_source value → teacher role name ({math: teacher_math, code: teacher_code}): "
        "each named role becomes a frozen teacher of its own, replacing the spec's teachers "
        "(its config section: <role>.model_path, backend, batch sizes) and scores the rows of "
        "its sources; a row of another source is refused unless default_teacher names one of "
        "them. Empty: the spec's teacher roles. Not with teacher_routes or teacher_weights.",
        factory=dict,
    )
    teacher_routes: dict[str, str] = help_field(
        "data_source value → the teacher role that scores its rows ({math: teacher, code: "
        "teacher_code}); rows of other sources go to default_teacher. Empty: every row to it.",
        factory=dict,
    )
    route_key: str = help_field(
        "The dataset column teacher_routes reads (a row's value names its teacher); with "
        "routes set, data without the column is refused.",
        default="data_source",
    )
    teacher_weights: dict[str, float] = help_field(
        "Teacher role → weight, one for every teacher role of the spec: every row is scored "
        "by each teacher and the student distills toward their mixture, log Σ w_i·p_i(token) "
        "(weights normalised); empty: each row to one teacher (teacher_routes). Not with "
        "teachers, teacher_routes, default_teacher, route_key or top_k.",
        factory=dict,
    )
    default_teacher: str | None = help_field(
        "The teacher role for rows whose data_source teacher_routes (or teachers) does not name "
        "(null: the spec's first teacher, or with teachers none: such rows are refused; set "
        "teacher_routes for every source and this to '' to refuse unrouted rows).",
        default=None,
    )
    top_k: int = help_field(
        "k > 0 adds the top-k logit KL loss: each teacher ships its k most likely tokens per "
        "response position and the student minimises the forward KL(teacher‖student) over "
        "them (see top_k_tail); 0: the sampled-token reverse KL only. Pure top-k "
        "distillation: set distill_coef to 0.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    top_k_coef: float = help_field(
        "Weight of the top-k logit KL loss in the actor's loss (with top_k > 0).",
        default=1.0,
        validator=attrs.validators.ge(0.0),
    )
    top_k_tail: Literal["bucket", "renormalize"] = help_field(
        "The vocabulary outside the teacher's top-k: bucket (one more outcome holding the "
        "remaining mass of each model: a lower bound of the full forward KL) or renormalize "
        "(both models renormalised over the k tokens).",
        default="bucket",
        validator=attrs.validators.in_(("bucket", "renormalize")),
    )
