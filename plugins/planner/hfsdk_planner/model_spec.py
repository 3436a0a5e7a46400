"""Model sizes the planner reasons about: parameters and the transformer shape.

A model is given as a named size (``7B``, ``13B``, ``34B``, ``70B`` with the
standard Llama shapes), a parameter count (``6.7e9``, ``"1.3B"``, ``"350M"``),
an HF ``config.json`` dict, or a path to such a file or its directory.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HfsdkError


@attrs.frozen(kw_only=True)
class ModelSpec:
    """A decoder-only transformer: parameter count and the shape that sets costs.

    ``num_params`` drives FLOPs and state memory; the shape drives the KV
    cache and tensor-parallel traffic, and which layouts divide evenly.
    """

    name: str
    num_params: int
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    head_size: int = 0
    """Width of one attention head when the config sets it apart from hidden / heads
    (Qwen3, Gemma); 0 means ``hidden_size // num_heads``."""
    tied_embeddings: bool = False
    """Whether the LM head is the input embeddings (``tie_word_embeddings``): one ``V x h``
    matrix in ``num_params`` rather than two."""
    vision_params: int = 0
    """Parameters of a vision-language model's vision tower, included in ``num_params``:
    they take memory and traffic as the decoder's do, but no per-token work, so FLOPs and
    decode reads leave them out (:attr:`text_params`)."""

    def __attrs_post_init__(self) -> None:
        for field in (
            "num_params",
            "num_layers",
            "hidden_size",
            "num_heads",
            "num_kv_heads",
            "intermediate_size",
            "vocab_size",
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise HfsdkError(
                    f"model {self.name!r}: {field} must be a positive integer, got {value!r}"
                )
        check_head_width(self.head_size, self.name)
        if not 0 <= self.vision_params < self.num_params:
            raise HfsdkError(
                f"model {self.name!r}: vision_params must be >= 0 and below num_params "
                f"({self.num_params}), got {self.vision_params!r}; check the config"
            )
        # An explicit head width frees hidden_size from being a multiple of the heads.
        if not self.head_size and self.hidden_size % self.num_heads:
            raise HfsdkError(
                f"model {self.name!r}: hidden_size {self.hidden_size} is not divisible by "
                f"num_heads {self.num_heads}; check the config"
            )
        if self.num_heads % self.num_kv_heads:
            raise HfsdkError(
                f"model {self.name!r}: num_heads {self.num_heads} is not a multiple of "
                f"num_kv_heads {self.num_kv_heads}; check the config"
            )

    @property
    def text_params(self) -> int:
        """Parameters of the decoder alone: ``num_params`` without the vision tower."""
        return self.num_params - self.vision_params

    @property
    def head_dim(self) -> int:
        """Width of one attention head: the config's ``head_dim``, else hidden / heads."""
        return self.head_size or self.hidden_size // self.num_heads

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """Bytes of K and V cache one token occupies across all layers."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes

    @classmethod
    def from_shape(
        cls,
        *,
        name: str,
        num_layers: int,
        hidden_size: int,
        num_heads: int,
        num_kv_heads: int,
        intermediate_size: int,
        vocab_size: int,
        tie_word_embeddings: bool = False,
        head_size: int = 0,
    ) -> ModelSpec:
        """A Llama-style model whose parameter count follows from its shape."""
        return cls(
            name=name,
            num_params=llama_param_count(
                num_layers=num_layers,
                hidden_size=hidden_size,
                num_heads=num_heads,
                num_kv_heads=num_kv_heads,
                intermediate_size=intermediate_size,
                vocab_size=vocab_size,
                tie_word_embeddings=tie_word_embeddings,
                head_size=head_size,
            ),
            num_layers=num_layers,
            hidden_size=hidden_size,
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            intermediate_size=intermediate_size,
            vocab_size=vocab_size,
            head_size=head_size,
            tied_embeddings=tie_word_embeddings,
        )

    @classmethod
    def from_hf_config(cls, config: dict[str, Any], name: str | None = None) -> ModelSpec:
        """From an HF ``config.json`` dict (Llama/Qwen/Mistral-style keys; a vision-language
        model's text model from its ``text_config``, :func:`text_model_config`, plus its
        vision tower's parameters, :func:`vision_tower_params`)."""
        label = name or str(config.get("_name_or_path") or config.get("model_type") or "model")
        vision = vision_tower_params(config)
        config = gpt_style_aliases(text_model_config(config))
        refuse_mixture_of_experts(config, label)
        required = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
        missing = [key for key in required if key not in config]
        if missing:
            raise HfsdkError(
                f"HF config lacks {', '.join(missing)}; the planner needs num_hidden_layers, "
                "hidden_size, num_attention_heads, vocab_size (and optionally "
                "num_key_value_heads, intermediate_size, head_dim)"
            )
        hidden = config["hidden_size"]
        heads = config["num_attention_heads"]
        text = cls.from_shape(
            name=label,
            num_layers=config["num_hidden_layers"],
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=config.get("num_key_value_heads") or heads,
            intermediate_size=config.get("intermediate_size") or 4 * hidden,
            vocab_size=config["vocab_size"],
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            # Qwen3 and Gemma set head_dim apart from hidden / heads; Llama leaves it out.
            head_size=check_head_width(config.get("head_dim") or 0, label),
        )
        return attrs.evolve(text, num_params=text.num_params + vision, vision_params=vision)

    @classmethod
    def from_param_count(cls, num_params: float, name: str | None = None) -> ModelSpec:
        """A Llama-proportioned shape for ``num_params`` parameters.

        The count itself is kept exactly; the shape (heads of 128 in multiples
        of 8, layers in multiples of 4, SwiGLU at 8/3 x hidden, 32k vocabulary)
        only sizes the KV cache and communication, and sets which
        tensor-parallel and pipeline sizes divide it, as the named sizes do.
        """
        if not (isinstance(num_params, int | float) and math.isfinite(num_params)):
            raise HfsdkError(f"parameter count must be a number, got {num_params!r}")
        if num_params < 1e6:
            raise HfsdkError(
                f"parameter count {num_params:g} is too small to plan for; give at least 1M "
                "(e.g. 125M, 7B)"
            )
        hidden, layers = synthetic_shape(num_params, SYNTHETIC_VOCAB)
        heads = hidden // SYNTHETIC_HEAD
        return cls(
            name=name or format_count(num_params),
            num_params=int(num_params),
            num_layers=layers,
            hidden_size=hidden,
            num_heads=heads,
            # As Llama-2 34B and 70B do, wide models share 8 grouped KV heads.
            num_kv_heads=GROUPED_KV_HEADS if heads >= 64 else heads,
            intermediate_size=round(hidden * 8 / 3 / 256) * 256,
            vocab_size=SYNTHETIC_VOCAB,
        )


# GPT-2 / GPT-J / GPT-Neo-era configs name the shape differently; the planner reads
# them under the Llama names (the HF classes expose the same attribute_map).
GPT_STYLE_KEYS = {
    "n_layer": "num_hidden_layers",
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "n_inner": "intermediate_size",
    "n_positions": "max_position_embeddings",
}


def gpt_style_aliases(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with GPT-2-style keys (``n_layer``, ``n_embd``, ``n_head``, ``n_inner``,
    ``n_positions``) copied to their Llama-style names where those are absent. A null
    ``n_inner`` stays null, so the MLP width defaults to 4 x hidden as GPT-2 reads it."""
    extra = {
        llama: config[gpt]
        for gpt, llama in GPT_STYLE_KEYS.items()
        if gpt in config and llama not in config
    }
    return {**config, **extra} if extra else config


def text_model_config(config: dict[str, Any]) -> dict[str, Any]:
    """The keys of the decoder the planner prices: ``config`` itself, or, for a
    vision-language model that keeps them under ``text_config`` (Qwen2-VL, LLaVA),
    that section, with the top level's ``tie_word_embeddings`` (the composite model
    ties its own head). The vision tower is counted apart (:func:`vision_tower_params`):
    its work runs on the image patches, not on every token as the decoder's does."""
    text = config.get("text_config")
    if "num_hidden_layers" in config or not isinstance(text, dict):
        return config
    if "tie_word_embeddings" in config:
        return {**text, "tie_word_embeddings": config["tie_word_embeddings"]}
    return text


MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")
"""HF config keys that mark a mixture-of-experts decoder (Mixtral, Qwen-MoE, DeepSeek)."""


def refuse_mixture_of_experts(config: dict[str, Any], name: str) -> None:
    """A one-line error if ``config`` describes a mixture-of-experts decoder.

    The dense count would price it by one expert's MLP (Mixtral-8x7B as 7.2B parameters
    instead of 46.7B) and plan memory that does not fit; until parameters (every expert)
    and FLOPs (the routed experts) are counted apart, such configs are refused.
    """
    # A dense config may carry the key switched off (0 or null); only a set one counts.
    found = [key for key in MOE_KEYS if config.get(key)]
    if found:
        raise HfsdkError(
            f"MoE models are not priced yet; model {name!r} sets {', '.join(found)}, "
            "but the planner counts only dense decoders; plan for a dense model of "
            "the same total parameter count (e.g. --model-size 47B) instead"
        )


def vision_tower_params(config: dict[str, Any]) -> int:
    """Parameters of the vision tower in ``config["vision_config"]`` (0 without one).

    Qwen2-VL's tower (``embed_dim`` wide, ``depth`` blocks, a patch merger onto the
    decoder's ``hidden_size``) is counted exactly; another ViT-style tower (``hidden_size``,
    ``intermediate_size``, ``depth`` or ``num_hidden_layers``) by its blocks' matrices.
    """
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return 0
    if "embed_dim" in vision:
        return _qwen2_vl_tower_params(vision)
    width, ffn = vision.get("hidden_size"), vision.get("intermediate_size")
    depth = vision.get("depth") or vision.get("num_hidden_layers")
    if not (isinstance(width, int) and isinstance(ffn, int) and isinstance(depth, int)):
        return 0  # a tower the planner cannot size: priced as before, by the decoder alone
    # Attention's four h x h projections and the MLP's two, with their biases and norms.
    return depth * (4 * width * width + 2 * width * ffn + 9 * width + ffn)


def _qwen2_vl_tower_params(vision: dict[str, Any]) -> int:
    """Qwen2-VL's vision tower: a Conv3d patch embedding, ``depth`` LayerNorm blocks
    (biased qkv/proj, a ``mlp_ratio`` MLP) and the merger of ``spatial_merge_size``^2
    patches onto the decoder's width."""
    width = int(vision["embed_dim"])
    ffn = int(width * vision.get("mlp_ratio", 4))
    patch = int(vision.get("patch_size", 14))
    embed = width * int(vision.get("in_channels", 3)) * int(vision.get("temporal_patch_size", 2))
    block = 4 * width * width + 2 * width * ffn + 9 * width + ffn
    merged = width * int(vision.get("spatial_merge_size", 2)) ** 2
    out = int(vision.get("hidden_size", width))
    merger = 2 * width + merged * merged + merged + out * merged + out
    return embed * patch * patch + int(vision.get("depth", 0)) * block + merger


def check_head_width(head_size: Any, name: str) -> int:
    """``head_size`` if it is a head width (0: hidden / heads), else a one-line error."""
    if isinstance(head_size, bool) or not isinstance(head_size, int) or head_size < 0:
        raise HfsdkError(
            f"model {name!r}: head_dim must be a positive integer, got {head_size!r}; "
            "check the config"
        )
    return head_size


SYNTHETIC_VOCAB = 32000
"""Vocabulary of a shape made up from a parameter count (Llama-2's)."""
SYNTHETIC_HEAD = 128
"""Head width of a made-up shape; heads come in multiples of 8 so tp 1-8 divide them."""
HIDDEN_STEP = 8 * SYNTHETIC_HEAD
GROUPED_KV_HEADS = 8
"""KV heads of a made-up shape with 64 heads or more (Llama-2 34B/70B's grouping)."""
LAYER_STEP = 4
"""Layers of a made-up shape come in fours, so pipelines of 2 and 4 stages divide them."""


def synthetic_shape(num_params: float, vocab: int) -> tuple[int, int]:
    """``(hidden, layers)`` for about ``num_params`` parameters, Llama-proportioned.

    ``12 L h^2 + 2 V h`` counts the parameters; Llama keeps ``h`` near
    ``128 L``. Of the two hidden sizes in steps of 1024 around that ideal,
    the one whose layer count (in steps of 4) lands nearer ``h / 128`` wins,
    so 7e9 gives Llama-7B's 4096 x 32 rather than an odd-headed shape.
    """
    ideal = (num_params * 128 / 12) ** (1 / 3)
    low = max(1, math.floor(ideal / HIDDEN_STEP))
    candidates = []
    for steps in (low, low + 1):
        hidden = steps * HIDDEN_STEP
        body = (num_params - 2 * vocab * hidden) / (12 * hidden * hidden)
        layers = max(LAYER_STEP, round(body / LAYER_STEP) * LAYER_STEP)
        # How far the depth strays from Llama's proportion, on a log scale.
        stray = abs(math.log(layers * 128 / hidden))
        candidates.append((stray, hidden, layers))
    _, hidden, layers = min(candidates)
    return hidden, layers


def llama_param_count(
    *,
    num_layers: int,
    hidden_size: int,
    num_heads: int,
    num_kv_heads: int,
    intermediate_size: int,
    vocab_size: int,
    tie_word_embeddings: bool = False,
    head_size: int = 0,
) -> int:
    """Parameters of a Llama-style decoder (no biases, RMSNorm, SwiGLU MLP).

    ``head_size`` is the attention head width when it is not hidden / heads.
    """
    head_dim = head_size or hidden_size // num_heads
    attention = hidden_size * head_dim * (2 * num_heads + 2 * num_kv_heads)
    mlp = 3 * hidden_size * intermediate_size
    per_layer = attention + mlp + 2 * hidden_size
    embeddings = vocab_size * hidden_size * (1 if tie_word_embeddings else 2)
    return num_layers * per_layer + embeddings + hidden_size


# Llama-2 7B/13B/70B and Code Llama 34B shapes.
NAMED_SHAPES: dict[str, dict[str, int]] = {
    "7B": dict(
        num_layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=32,
        intermediate_size=11008,
        vocab_size=32000,
    ),
    "13B": dict(
        num_layers=40,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=40,
        intermediate_size=13824,
        vocab_size=32000,
    ),
    "34B": dict(
        num_layers=48,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        intermediate_size=22016,
        vocab_size=32000,
    ),
    "70B": dict(
        num_layers=80,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        intermediate_size=28672,
        vocab_size=32000,
    ),
}
"""Standard Llama shapes for the named sizes."""

_COUNT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbt]?)\s*$", re.IGNORECASE)
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def format_count(num_params: float) -> str:
    """``6.74e9`` -> ``"6.7B"``, ``3.5e8`` -> ``"350M"``."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if num_params >= scale:
            return f"{num_params / scale:.3g}{suffix}"
    return f"{num_params:.3g}"


def named_model(size: str) -> ModelSpec:
    """The standard Llama shape for ``7B``, ``13B``, ``34B`` or ``70B``."""
    key = size.strip().upper()
    if key not in NAMED_SHAPES:
        raise HfsdkError(
            f"unknown named model size {size!r}; named sizes: {', '.join(NAMED_SHAPES)}"
        )
    return ModelSpec.from_shape(name=key, **NAMED_SHAPES[key])


def resolve_model(value: str | int | float | dict[str, Any] | ModelSpec) -> ModelSpec:
    """Turn any accepted model description into a :class:`ModelSpec`.

    Accepted: a ModelSpec; a named size (``"13B"``); a parameter count as a
    number or string (``7e9``, ``"1.3B"``, ``"350M"``); an HF config dict; a
    path to a ``config.json`` or a directory holding one.
    """
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, dict):
        return ModelSpec.from_hf_config(value)
    if isinstance(value, bool):
        raise HfsdkError(f"model size must be a size or parameter count, got {value!r}")
    if isinstance(value, int | float):
        return ModelSpec.from_param_count(value)
    if not isinstance(value, str):
        raise HfsdkError(
            f"model size must be a string, number or HF config dict, got {type(value).__name__}"
        )
    text = value.strip()
    if text.upper() in NAMED_SHAPES:
        return named_model(text)
    match = _COUNT_RE.match(text)
    if match:
        return ModelSpec.from_param_count(float(match[1]) * _SUFFIX[match[2].lower()])
    path = Path(text).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        try:
            config = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise HfsdkError(f"cannot read HF config {str(path)!r}: {exc}") from exc
        if not isinstance(config, dict):
            raise HfsdkError(f"HF config {str(path)!r} is not a JSON object")
        return ModelSpec.from_hf_config(config, name=path.parent.name or path.stem)
    raise HfsdkError(
        f"cannot understand model size {value!r}; give a named size "
        f"({', '.join(NAMED_SHAPES)}), a parameter count (7e9, 1.3B, 350M) or a path to an HF "
        "config.json"
    )
