"""Run-config checks of the megatron backend, done before Ray starts (no torch import).

For every role that selects ``backend: megatron``: the model's architecture
must be one the converter knows, ``tp`` must divide its heads (and key/value
heads and FFN width), ``pp`` its layers, and ``tp · pp`` the devices of the
role's pool.
"""

from __future__ import annotations

from typing import Any

from hfsdk import HfsdkError
from hfsdk_backend_megatron.arch import ModelShape, layout_problems, read_shape

_SIGNALS = ("reward", "cost")


def default_task_shape() -> ModelShape:
    """The built-in default task's model shape, from its spec (no assets are built)."""
    from hfsdk import DefaultTaskSpec

    spec = DefaultTaskSpec()
    return ModelShape(
        family="llama",
        vocab_size=1,
        hidden_size=spec.hidden_size,
        num_layers=spec.num_layers,
        num_heads=spec.num_heads,
        num_kv_heads=spec.num_heads,
        head_dim=spec.hidden_size // spec.num_heads,
        ffn_hidden_size=spec.intermediate_size,
        norm_eps=1e-6,
        rope_theta=10000.0,
        max_positions=spec.max_position_embeddings,
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
    for role, section in sections:
        path = section.model_path or actor_path
        try:
            shape = read_shape(path, role) if path else default_task_shape()
        except HfsdkError as exc:
            problems.append(str(exc))
            continue
        devices = section.parallel.tp * section.parallel.pp
        if placement is not None and placement.mode == "manual":
            devices = placement.pools[placement.pool_of(role)].devices
        problems += layout_problems(shape, section.parallel.tp, section.parallel.pp, devices, role)
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

    tp, pp = section.parallel.tp, section.parallel.pp
    train = TrainLayout(pp, tp, max(1, devices // (tp * pp)))
    heads = HeadShape(
        num_layers=shape.num_layers, num_heads=shape.num_heads, num_kv_heads=shape.num_kv_heads
    )
    try:
        resolve_rollout_layout(train, section.rollout_layout, heads)
    except HfsdkError as exc:
        return [f"actor.rollout_layout: {exc}"]
    return []
