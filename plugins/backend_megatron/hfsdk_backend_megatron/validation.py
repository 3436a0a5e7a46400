"""Run-config checks of the megatron backend, done before Ray starts (no model loads).

For every role that selects ``backend: megatron``: the model's architecture
must be one the converter knows, ``tp`` must divide its heads (and key/value
heads and FFN width), ``pp`` its layers, and ``tp · pp`` the devices of the
role's pool; a trained role's ``mini_batch_size`` must split over its dp
replicas (in whole preference pairs where its rows come in pairs), and
distillation's ``algorithm.top_k`` needs an fsdp actor and teachers.
"""

from __future__ import annotations

from typing import Any

from hfsdk import HfsdkError
from hfsdk_backend_megatron.arch import ModelShape, layout_problems, read_shape

_SIGNALS = ("reward", "cost")


def default_task_shape() -> ModelShape:
    """The default task's model shape, from the task registry (no assets are built)."""
    from hfsdk import default_model_config

    config = default_model_config()
    return ModelShape(
        family="llama",
        vocab_size=1,
        hidden_size=config["hidden_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        num_kv_heads=config["num_key_value_heads"],
        head_dim=config["hidden_size"] // config["num_attention_heads"],
        ffn_hidden_size=config["intermediate_size"],
        norm_eps=1e-6,
        rope_theta=10000.0,
        max_positions=config["max_position_embeddings"],
        tie_embeddings=False,
        qkv_bias=False,
        initializer_range=0.02,
    )


def _megatron_sections(config: Any) -> list[tuple[str, Any]]:
    found = []
    for name, section in config.sections.items():
        if name in _SIGNALS:
            section = getattr(section, "model", None)
        if getattr(section, "backend", None) == "megatron" and hasattr(section, "parallel"):
            found.append((name, section))
    return found


def run_config_problems(config: Any) -> list[str]:
    """One message per problem (empty when every megatron role can be built)."""
    problems: list[str] = []
    sections = _megatron_sections(config)
    if not sections:
        return problems
    placement = config.sections.get("placement")
    actor_path = getattr(config.sections.get("actor"), "model_path", None)
    trained = _trained_roles(config)
    paired = _paired_roles(config, trained)
    problems += _shared_pool_problems(sections, placement) + _dtype_problems(sections, trained)
    problems += _top_k_problems(config, sections)
    for role, section in sections:
        path = section.model_path or actor_path
        try:
            shape = read_shape(path, role) if path else default_task_shape()
        except HfsdkError as exc:
            problems.append(str(exc))
            continue
        devices = section.parallel.tp * section.parallel.pp
        manual = placement is not None and placement.mode == "manual"
        if manual:
            devices = placement.pools[placement.pool_of(role)].devices
        problems += layout_problems(shape, section.parallel.tp, section.parallel.pp, devices, role)
        if role in paired:  # whole pairs on every replica implies a multiple of dp
            problems += _pair_problems(role, section, devices, fixed=manual)
        elif role in trained and manual:
            problems += _mini_batch_problems(role, section, devices, placement.pool_of(role))
        if role == "actor" and not problems:
            problems += rollout_layout_problems(shape, section, devices)
        lora = getattr(section, "lora", None)
        if lora is not None and lora.enabled:
            problems.append(lora_problem(role, lora.rank))
        if section.parallel.sequence_parallel:
            problems.append(
                f"{role}.parallel.sequence_parallel is not supported by the megatron backend "
                "yet; set it to false"
            )
    return problems


def _shared_pool_problems(sections: list[tuple[str, Any]], placement: Any) -> list[str]:
    """Megatron roles fused into one pool's processes need one (tp, pp) layout.

    They share megatron-core's global parallel state there. Under ``colocation: separate``
    every role has its own processes, so any layouts mix. Under ``mode: auto`` the planner
    picks the pools later and may put any two roles in one, so all megatron roles need one.
    """
    if placement is None or placement.colocation != "fused":
        return []
    manual = placement.mode == "manual"
    first: dict[str, tuple[str, int, int]] = {}
    problems = []
    for role, section in sections:
        tp, pp = section.parallel.tp, section.parallel.pp
        pool = placement.pool_of(role) if manual else ""  # auto: any two may share a pool
        other, other_tp, other_pp = first.setdefault(pool, (role, tp, pp))
        if (tp, pp) == (other_tp, other_pp):
            continue
        differs = (
            f"{role}.parallel (tp={tp}, pp={pp}) differs from {other}.parallel "
            f"(tp={other_tp}, pp={other_pp})"
        )
        if manual:
            problems.append(
                f"{differs}, and both run in pool {pool!r}'s processes (placement.colocation: "
                "fused); give them the same tp and pp, put them on separate pools "
                "(placement.roles), or give each role its own processes "
                "(placement.colocation: separate)"
            )
        else:
            problems.append(
                f"{differs}, and placement.mode: auto may fuse both into one pool's processes "
                "(placement.colocation: fused); give them the same tp and pp, place them on "
                "separate pools yourself (placement.mode: manual with placement.roles), or give "
                "each role its own processes (placement.colocation: separate)"
            )
    return problems


def _trained_roles(config: Any) -> set[str]:
    """The roles of the run's algorithm whose declared kind is trained (they take updates)."""
    from hfsdk import TRAINED_KINDS, run_spec

    return {r.name for r in run_spec(config).roles if r.kind in TRAINED_KINDS}


def _mini_batch_problems(role: str, section: Any, devices: int, pool: str) -> list[str]:
    """``mini_batch_size`` must split evenly over a trained role's dp = devices / (tp·pp).

    The engine would refuse it only at the first update, after the models loaded and a
    whole rollout ran. A layout that does not divide the devices is reported on its own.
    """
    tp, pp = section.parallel.tp, section.parallel.pp
    if devices % (tp * pp):
        return []
    dp = devices // (tp * pp)
    if section.mini_batch_size % dp == 0:
        return []
    return [
        f"{role}.mini_batch_size={section.mini_batch_size} is not divisible by the {dp} "
        f"data-parallel replicas of {role} (the {devices} devices of pool {pool!r} / (tp={tp} "
        f"x pp={pp})); make it a multiple of {dp}"
    ]


def _paired_roles(config: Any, trained: set[str]) -> set[str]:
    """The trained roles whose rows come in preference pairs (DPO's policy, a score model)."""
    if not trained:
        return set()
    from hfsdk import run_spec
    from hfsdk_backend_common.engine_support import paired_roles

    return paired_roles(run_spec(config))


def _pair_problems(role: str, section: Any, devices: int, *, fixed: bool) -> list[str]:
    """A trained role's ``mini_batch_size`` must hold whole preference pairs on each of its
    dp = devices / (tp·pp) replicas (the engine's own check, which ran only at the first
    update, after the models loaded).

    ``fixed`` (a manual placement): ``devices`` is the role's pool. Otherwise the ranks are
    decided later, so only the pairs are checked (as on one replica). A layout that does not
    divide the devices is reported on its own.
    """
    from hfsdk_backend_common.engine_support import PAIR_ROWS, check_minibatch_groups

    layout = section.parallel.tp * section.parallel.pp
    if fixed and devices % layout:
        return []
    dp = devices // layout if fixed else 1
    try:
        check_minibatch_groups(role, section.mini_batch_size, dp, PAIR_ROWS)
    except HfsdkError as exc:
        return [str(exc)]
    return []


def _top_k_problems(config: Any, sections: list[tuple[str, Any]]) -> list[str]:
    """Top-k distillation (``algorithm.top_k`` > 0) on a megatron actor or teacher.

    The engine has neither piece: ``top_k`` makes the teachers compute their top-k
    log-probs (``compute_ref_log_prob`` with ``REF_TOP_K``) and adds the ``top_k_kl``
    token loss term to the actor's objective; it refuses both only at the first step.
    """
    # Only distillation's algorithm section has top_k; the others have no such field.
    top_k = getattr(config.sections.get("algorithm"), "top_k", 0) or 0
    if not top_k:
        return []
    from hfsdk import run_spec

    spec = run_spec(config)
    teachers = set(spec.roles_of_kind("frozen_policy"))
    policies = set(spec.roles_of_kind("policy"))
    problems = []
    for role, _ in sections:
        if role in policies:
            problems.append(
                f"algorithm.top_k={top_k} with {role}.backend: megatron: the megatron backend "
                "does not train the top_k_kl loss term (it needs the policy's log-probs at "
                f"the teacher's token ids); train {role} on fsdp ({role}.backend: fsdp) or "
                "set algorithm.top_k: 0"
            )
        elif role in teachers:
            problems.append(
                f"algorithm.top_k={top_k} with {role}.backend: megatron: the megatron backend "
                f"does not compute a teacher's top-k log-probs; run {role} on fsdp "
                f"({role}.backend: fsdp) or set algorithm.top_k: 0"
            )
    return problems


def _dtype_problems(sections: list[tuple[str, Any]], trained: set[str]) -> list[str]:
    """A trained megatron role computes in float32 here: another ``dtype`` would be ignored."""
    return [
        f"{role}.dtype={section.dtype}: the megatron backend trains in float32 (master weights "
        f"and compute), so this would be ignored; set {role}.dtype: float32, or use "
        f"{role}.backend: fsdp for bfloat16 training"
        for role, section in sections
        if role in trained and section.dtype != "float32"
    ]


def lora_problem(role: str, rank: int) -> str:
    """The one line that refuses LoRA on a megatron role."""
    return (
        f"{role}.lora.rank={rank}: LoRA is not supported by the megatron backend; set "
        f"{role}.lora.rank: 0 or use {role}.backend: fsdp"
    )


def rollout_layout_problems(shape: ModelShape, section: Any, devices: int) -> list[str]:
    """``actor.rollout_layout`` must be a regrouping of the training layout (one message)."""
    from hfsdk_backend_common.hybrid.layout import HeadShape, TrainLayout
    from hfsdk_backend_common.hybrid.layout_config import resolve_rollout_layout

    layout = section.rollout_layout
    tp, pp = section.parallel.tp, section.parallel.pp
    train = TrainLayout(pp, tp, max(1, devices // (tp * pp)))
    heads = HeadShape(
        num_layers=shape.num_layers, num_heads=shape.num_heads, num_kv_heads=shape.num_kv_heads
    )
    try:
        resolve_rollout_layout(train, layout, heads)
    except HfsdkError as exc:
        return [f"actor.rollout_layout: {exc}"]
    return []
