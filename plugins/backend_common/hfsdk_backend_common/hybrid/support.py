"""Which HF models the hfsdk decoder (``TPDecoder``) can decode, as one-line reasons."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def decoder_problems(model: Mapping[str, Any]) -> list[str]:
    """Why ``rollout.decoder: hfsdk`` cannot decode a model (empty: it can)."""
    return tp_support_problems(
        model, 1, where="rollout.decoder=hfsdk", fix="set rollout.decoder: transformers"
    )


def tp_support_problems(
    model: Mapping[str, Any],
    tg: int,
    *,
    where: str | None = None,
    fix: str = "set actor.rollout_layout.tp: 1",
) -> list[str]:
    """Why a model (its HF ``config.json`` as a dict) cannot generate at ``tg`` (empty: it can).

    ``where`` names the setting that asked for the hfsdk decoder and ``fix``
    what to change instead (the messages' two ends).
    """
    where = where or f"actor.rollout_layout.tp={tg}"
    model_type = model.get("model_type", "?")
    if model_type != "llama":
        return [
            f"{where} decodes Llama models only, not model_type {model_type!r}; "
            f"{fix} for this model"
        ]
    problems = []
    if model.get("attention_bias") or model.get("mlp_bias"):
        problems.append(
            f"{where} decodes Llama models without biases (attention_bias/mlp_bias are set); "
            f"{fix} for this model"
        )
    rope = model.get("rope_parameters") or model.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) not in ("default", None):
        problems.append(
            f"{where} decodes plain RoPE, not rope_type {rope.get('rope_type')!r}; "
            f"{fix} for this model"
        )
    if model.get("hidden_act", "silu") != "silu":
        problems.append(
            f"{where} decodes SwiGLU (hidden_act silu), not {model.get('hidden_act')!r}; "
            f"{fix} for this model"
        )
    heads = int(model.get("num_attention_heads", 0))
    kv_heads = int(model.get("num_key_value_heads") or heads)
    ffn = int(model.get("intermediate_size", 0))
    sizes = {f"{heads} query heads": heads, f"{kv_heads} key/value heads": kv_heads,
             f"FFN width {ffn}": ffn}  # fmt: skip
    undivided = [name for name, size in sizes.items() if size % tg]
    if undivided:
        problems.append(
            f"{where} does not divide the model's {' and '.join(undivided)}; choose a "
            "divisor of its query heads, key/value heads and FFN width"
        )
    return problems
