"""What the converter knows about an HF model: its architecture and shape, checked for a layout.

Light module (no torch, no megatron): the config validation hook reads a
model directory's ``config.json`` with it before any worker starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HfsdkError

ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "LlamaForTokenClassification": "llama",
    "LlamaForSequenceClassification": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen2ForTokenClassification": "qwen2",
    "Qwen2ForSequenceClassification": "qwen2",
}
"""HF architectures the converter maps onto megatron-core's GPT layer spec."""


@attrs.frozen(kw_only=True)
class ModelShape:
    """The dimensions of a Llama / Qwen2 decoder that the converter and the model builder need."""

    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_hidden_size: int
    norm_eps: float
    rope_theta: float
    max_positions: int
    tie_embeddings: bool
    qkv_bias: bool
    initializer_range: float

    @property
    def heads_per_group(self) -> int:
        """Query heads sharing one key/value head (grouped-query attention)."""
        return self.num_heads // self.num_kv_heads

    def padded_vocab(self, tp: int) -> int:
        """The vocabulary rounded up to a multiple of ``tp`` (each rank holds an equal slice)."""
        return -(-self.vocab_size // tp) * tp


def _rope_theta(config: dict[str, Any]) -> float:
    if "rope_theta" in config:
        return float(config["rope_theta"])
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    return float(params.get("rope_theta", 10000.0))


def _sliding_layers(config: dict[str, Any]) -> list[int]:
    """The layers an HF (Qwen2) config gives sliding-window attention, as transformers reads it.

    transformers 5 writes each layer's kind in ``layer_types``; older configs have only
    ``use_sliding_window``, ``sliding_window`` and ``max_window_layers`` (the layers from
    that index on slide). ``use_sliding_window: false`` (Qwen2.5's configs) means none.
    """
    layer_types = config.get("layer_types")
    if layer_types is not None:
        return [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
    if not config.get("use_sliding_window") or config.get("sliding_window") is None:
        return []
    first = int(config.get("max_window_layers", 28))  # transformers' Qwen2Config default
    return list(range(first, int(config["num_hidden_layers"])))


def shape_from_config(config: dict[str, Any], where: str = "the model") -> ModelShape:
    """The :class:`ModelShape` of an HF ``config.json`` dict; a clear error for unknown models."""
    names = config.get("architectures") or []
    family = next((ARCHITECTURES[n] for n in names if n in ARCHITECTURES), None)
    if family is None:
        family = {"llama": "llama", "qwen2": "qwen2"}.get(str(config.get("model_type")))
    if family is None:
        raise HfsdkError(
            f"{where} is a {names or config.get('model_type')!r} model, which the megatron "
            f"converter does not know; it converts {sorted(set(ARCHITECTURES))} (Llama and "
            "Qwen2 families) — use backend: fsdp for other models"
        )
    # transformers 5 writes rope scaling as rope_parameters, older releases as rope_scaling.
    scaling = config.get("rope_parameters") or config.get("rope_scaling")
    unmapped = []
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type")) not in (
        None,
        "default",
    ):
        unmapped.append(f"rope scaling {scaling!r}")
    if family == "llama" and config.get("attention_bias"):
        unmapped.append("attention_bias (an output-projection bias too)")
    if config.get("mlp_bias"):
        unmapped.append("mlp_bias")
    if config.get("hidden_act", "silu") != "silu":
        unmapped.append(f"hidden_act {config.get('hidden_act')!r} (it builds SwiGLU)")
    sliding = _sliding_layers(config)
    if sliding:
        # megatron's layers attend over the whole causal prefix: past the window every
        # position would differ from the HF model, silently.
        unmapped.append(
            f"sliding-window attention (sliding_window={config.get('sliding_window')!r} on "
            f"{len(sliding)} of its {config.get('num_hidden_layers')} layers)"
        )
    if unmapped:
        raise HfsdkError(
            f"{where} uses {' and '.join(unmapped)}, which the megatron converter does not "
            "map; use backend: fsdp for it"
        )
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    return ModelShape(
        family=family,
        vocab_size=int(config["vocab_size"]),
        hidden_size=hidden,
        num_layers=int(config["num_hidden_layers"]),
        num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        ffn_hidden_size=int(config["intermediate_size"]),
        norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        rope_theta=_rope_theta(config),
        max_positions=int(config.get("max_position_embeddings", 2048)),
        tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=family == "qwen2",
        initializer_range=float(config.get("initializer_range", 0.02)),
    )


def read_shape(model_dir: str | Path, role: str = "model") -> ModelShape:
    """The :class:`ModelShape` of the HF model directory ``model_dir``."""
    path = Path(model_dir).expanduser() / "config.json"
    if not path.is_file():
        raise HfsdkError(
            f"'{role}.model_path' is {str(model_dir)!r}, which is not a local HF model "
            "directory (no config.json there); pass a directory made with save_pretrained"
        )
    return shape_from_config(json.loads(path.read_text()), f"{role}'s model {str(model_dir)!r}")


def layout_problems(shape: ModelShape, tp: int, pp: int, devices: int, role: str) -> list[str]:
    """Why (tp, pp) cannot shard ``shape`` over ``devices`` devices (empty when it can)."""
    problems = []
    if devices % (tp * pp):
        problems.append(
            f"{role}.parallel: tp={tp} x pp={pp} = {tp * pp} does not divide the {devices} "
            f"devices of {role}'s pool; choose tp·pp dividing {devices} (dp = devices / (tp·pp))"
        )
    if shape.num_heads % tp or shape.num_kv_heads % tp:
        problems.append(
            f"{role}.parallel.tp={tp} does not divide the model's {shape.num_heads} attention "
            f"heads and {shape.num_kv_heads} key/value heads; choose tp dividing both"
        )
    if shape.ffn_hidden_size % tp:
        problems.append(
            f"{role}.parallel.tp={tp} does not divide intermediate_size="
            f"{shape.ffn_hidden_size}; choose a tp that divides it"
        )
    if shape.num_layers % pp:
        problems.append(
            f"{role}.parallel.pp={pp} does not divide the model's {shape.num_layers} layers; "
            "choose pp dividing the number of layers"
        )
    return problems
