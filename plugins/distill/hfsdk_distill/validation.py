"""Cross-section checks of a run of a distillation spec (``distill`` or one derived from it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from hfsdk import run_spec
from hfsdk_distill.distill_config import DistillConfig
from hfsdk_distill.routing import idle_teacher_problems, routing_problems, weight_problems

TEACHER_ESTIMATORS = ("reverse_kl",)
"""The registered advantage estimators that read ``teacher_log_probs``; any other (GRPO's
takes it among its unused keywords) would train without the teacher."""


# Settings of hfsdk.AlgorithmConfig that distillation never reads, with why: its program
# calls no rewards_with_kl (the KL controller is built and never used) and its batch has no
# ref_log_probs for a KL loss. Set to anything but their default they were dropped silently.
_UNREAD_KL = {
    "kl_coef": "it has no reference role, so no reward KL to weigh",
    "kl_controller": "it has no reference role, so no reward KL to control",
    "target_kl": "it has no reference role, so no reward KL to control",
    "kl_horizon": "it has no reference role, so no reward KL to control",
    "kl_estimator": "it has no reference log-probs for a KL loss",
}

# The top-k loss's settings: distill_actor_objective reads them only with top_k > 0.
_TOP_K_SETTINGS = ("top_k_coef", "top_k_tail")


def distill_config_problems(config: Any) -> list[str]:
    """One line per problem; for another algorithm's run, only its use of ``reverse_kl``."""
    algo = config.algorithm
    if not isinstance(algo, DistillConfig):
        return _teacher_estimator_problems(config)
    spec = run_spec(config)
    teachers = spec.roles_of_kind("frozen_policy")
    problems = routing_problems(algo.teacher_routes, algo.default_teacher, teachers)
    if not problems and not algo.teachers and not algo.teacher_weights:
        # Only with the routes' roles known: a misnamed one is already reported above.
        problems += idle_teacher_problems(algo.teacher_routes, algo.default_teacher, teachers)
    if (
        algo.default_teacher == ""
        and not algo.teacher_routes
        and not algo.teachers
        and not algo.teacher_weights
    ):
        # '' refuses every row no route names, and with no routes that is every row: each
        # step would fail after generating.
        problems.append(
            "algorithm.default_teacher='' refuses the rows no route names, and "
            "algorithm.teacher_routes is empty, so every row would be refused after "
            "generation; route your data_source values in algorithm.teacher_routes, or set "
            "algorithm.default_teacher to a teacher role (null: the first)"
        )
    if algo.advantage_estimator not in TEACHER_ESTIMATORS:
        problems.append(
            f"algorithm.advantage_estimator={algo.advantage_estimator!r} reads no teacher "
            "log-probs, so the teachers would be dropped and nothing distilled; set "
            f"algorithm.advantage_estimator: {' or '.join(TEACHER_ESTIMATORS)} (its "
            "algorithm.reward_weight adds the task reward), or use --algo grpo for no teacher"
        )
    if algo.teachers and algo.teacher_routes:
        problems.append(
            "algorithm.teachers and algorithm.teacher_routes are both set: teachers names the "
            "teacher roles and routes each data_source to one; keep only algorithm.teachers"
        )
    placement = config.sections.get("placement")
    if algo.teachers and placement is not None and placement.mode == "auto":
        problems.append(
            "placement: auto with algorithm.teachers: the planner plans the registered spec's "
            "roles, not the teachers a config names; give placement.pools (and placement.roles) "
            "yourself, or leave placement at its default"
        )
    for role in dict.fromkeys([*algo.teachers.values(), *teachers]):
        # Off the default task nothing fills a teacher's model in: unset, the teacher would
        # be the student's own model (a reverse KL of 0: nothing learned, nothing said).
        if role in config.sections and config.sections[role].model_path is None:
            sources = ", ".join(s for s, r in algo.teachers.items() if r == role)
            what = (
                f"algorithm.teachers routes {sources} to {role!r}, whose model_path is not set"
                if sources
                else f"{role}.model_path is not set (the teacher would be the student itself)"
            )
            problems.append(f"{what}; set {role}.model_path to that teacher's model directory")
    if algo.teachers and algo.teacher_weights:
        # _plan checked the weights first: every row went to the weighted teachers and the
        # teacher named for a row's source was built and never called.
        problems.append(
            "algorithm.teachers and algorithm.teacher_weights are both set: teachers sends each "
            "source's rows to one teacher, the weights score every row with every weighted "
            "teacher; keep one (teacher_weights mixes the spec's teachers, as distill_multi's)"
        )
    else:
        fields = attrs.fields_dict(DistillConfig)
        problems += weight_problems(
            algo.teacher_weights,
            teachers,
            algorithm=config.algo,
            default_teacher=(
                algo.default_teacher
                if algo.default_teacher != fields["default_teacher"].default
                else None
            ),
            route_key=algo.route_key if algo.route_key != fields["route_key"].default else None,
        )
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
    if algo.top_k:
        problems += _top_k_vocabulary_problems(config, algo.top_k, teachers)
    else:
        problems += _unread_problems(
            algo,
            {name: "the top-k loss is off with algorithm.top_k=0" for name in _TOP_K_SETTINGS},
            "set algorithm.top_k > 0 to use it, or remove it",
        )
    if algo.distill_coef == 0 and algo.reward_weight == 0 and not (algo.top_k and algo.top_k_coef):
        problems.append(
            "algorithm.distill_coef, reward_weight and the top-k loss (top_k, top_k_coef) are "
            "all 0: nothing would be learned; set distill_coef > 0 (or top_k and top_k_coef)"
        )
    if algo.kl_in_reward or algo.kl_loss_coef > 0:
        problems.append(
            "algorithm.kl_in_reward / kl_loss_coef: distillation has no reference role (the "
            "teachers are not references); the reverse KL to the teacher is already the "
            "advantage — set kl_in_reward: false and kl_loss_coef: 0"
        )
    problems += _unread_problems(
        algo,
        {
            name: f"algorithm {config.algo!r} never reads it ({why})"
            for name, why in _UNREAD_KL.items()
        },
        "remove it",
    )
    return problems


def _unread_problems(algo: DistillConfig, unread: dict[str, str], advice: str) -> list[str]:
    """One line per setting of ``unread`` (name → why it is not read) changed from its
    default: it would do nothing."""
    fields = attrs.fields_dict(type(algo))
    problems = []
    for name, why in unread.items():
        value, default = getattr(algo, name), fields[name].default
        if value != default:
            problems.append(
                f"algorithm.{name}={value!r}: {why}, so this setting would do nothing; "
                f"{advice} (default {default!r})"
            )
    return problems


def _teacher_estimator_problems(config: Any) -> list[str]:
    """``reverse_kl`` in a run of an algorithm without teachers: before, it loaded and failed at
    the first advantage, after loading the models, generating and scoring."""
    # getattr: not every algorithm's config has an estimator (reward_model's has none).
    estimator = getattr(config.algorithm, "advantage_estimator", None)
    if estimator not in TEACHER_ESTIMATORS:
        return []
    field = (
        attrs.fields_dict(type(config.algorithm)).get("advantage_estimator")
        if attrs.has(type(config.algorithm))
        else None
    )
    own = field.default if field is not None and isinstance(field.default, str) else None
    instead = f"its own estimator ({own})" if own else "another estimator"
    return [
        f"algorithm.advantage_estimator={estimator} needs the teacher's log-probs of the "
        "sampled tokens, which only a distillation algorithm's frozen teachers compute, and "
        f"algorithm {config.algo!r} has none; use --algo distill (teacher.model_path: the "
        f"teacher's model), or remove algorithm.advantage_estimator for {instead}"
    ]


def _vocab_rows(model_path: str | None) -> int | None:
    """The vocabulary rows of a model's ``config.json`` (the default task's model when
    ``None``); ``None`` when it does not say (the role's loader reports a bad directory)."""
    from hfsdk import default_model_config

    try:
        data = (
            default_model_config()
            if model_path is None
            else json.loads((Path(model_path) / "config.json").read_text())
        )
    except (OSError, ValueError):
        return None
    text = data.get("text_config") if isinstance(data, dict) else None
    rows = (text if isinstance(text, dict) else data).get("vocab_size")
    return rows if isinstance(rows, int) else None


def _top_k_vocabulary_problems(config: Any, top_k: int, teachers: tuple[str, ...]) -> list[str]:
    """A teacher's top-k may name ids past the student's rows (a vocabulary padded wider, as
    Qwen2.5-7B's 152,064 against 0.5B's 151,936): the update would index past the logits."""
    student = _vocab_rows(config.actor.model_path)
    problems = []
    known: dict[str, int] = {} if student is None else {"the student": student}
    for role in teachers:
        rows = _vocab_rows(config.sections[role].model_path) if role in config.sections else None
        if rows is not None:
            known[role] = rows
        if student is not None and rows is not None and rows > student:
            problems.append(
                f"algorithm.top_k={top_k}: {role}'s vocabulary has {rows} rows and the "
                f"student's {student}, so its top-k may name tokens the student has no row for; "
                "set top_k: 0 (the sampled tokens' reverse KL needs no such match) or give the "
                "teacher a model with the student's vocabulary size"
            )
    if known and top_k > min(known.values()):
        # A teacher's worker takes the top k of its logits: past its vocabulary that fails,
        # after the models are loaded and the first batch generated.
        owner = min(known, key=known.__getitem__)
        problems.append(
            f"algorithm.top_k={top_k} is more than the smallest vocabulary ({owner}'s, "
            f"{known[owner]} rows), so the teacher has no {top_k} tokens to ship; set "
            f"algorithm.top_k to at most {known[owner]}"
        )
    return problems
