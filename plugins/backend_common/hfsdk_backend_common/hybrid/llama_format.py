"""Llama-family weights in megatron-core's format: shapes, specs, HF name mapping.

The model-format half of the 3D-HybridEngine: :func:`llama_specs` lists the
:class:`~hfsdk_backend_common.hybrid.param_spec.ParamSpec` of every weight of a
Llama-shaped megatron GPT model (names ``decoder.layers.N.…``), and the
``hf_*`` / ``megatron_*`` functions convert between transformers' parameter
names and that layout. The fused QKV weight comes in two formats: ``grouped``
(megatron's: rows interleaved per key/value head group, ``[q_g; k_g; v_g]``
for each group g) and ``stacked`` (``[Q; K; V]``, what vLLM's
``QKVParallelLinear`` holds per rank).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk_backend_common.hybrid.param_spec import ParamSpec, tp_slice, training_shard

__all__ = [
    "LlamaShape",
    "ParamSpec",
    "grouped_qkv",
    "hf_llama_shape",
    "hf_llama_to_megatron",
    "hf_sources",
    "llama_specs",
    "megatron_to_hf_local",
    "megatron_weight",
    "split_grouped_qkv",
    "tp_slice",
    "training_shard",
]

if TYPE_CHECKING:
    import torch


@attrs.frozen(kw_only=True)
class LlamaShape:
    """A Llama-style decoder (RMSNorm, grouped-query attention, SwiGLU, untied output)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_size: int | None = None
    """Width of one attention head when it is not hidden_size / num_heads."""

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.head_size or self.hidden_size // self.num_heads

    def num_params(self) -> int:
        """Parameters of the whole model."""
        return sum(s.numel for s in llama_specs(self))


def llama_specs(shape: LlamaShape, *, qkv_format: str = "grouped") -> list[ParamSpec]:
    """The weights of a Llama-shaped megatron GPT model, in a fixed order."""
    if qkv_format not in ("grouped", "stacked"):
        raise ValueError(f"qkv_format={qkv_format!r}; expected 'grouped' or 'stacked'")
    h, f, hd = shape.hidden_size, shape.intermediate_size, shape.head_dim
    q_rows, kv_rows = shape.num_heads * hd, shape.num_kv_heads * hd
    qkv_parts = (q_rows, kv_rows, kv_rows) if qkv_format == "stacked" else ()
    specs = [
        ParamSpec(
            name="embedding.word_embeddings.weight",
            shape=(shape.vocab_size, h),
            split=0,
            place="first",
        )
    ]
    for layer in range(shape.num_layers):
        pre = f"decoder.layers.{layer}."
        specs += [
            ParamSpec(name=pre + "input_layernorm.weight", shape=(h,), layer=layer),
            ParamSpec(
                name=pre + "self_attention.linear_qkv.weight",
                shape=(q_rows + 2 * kv_rows, h),
                split=0,
                parts=qkv_parts,
                layer=layer,
            ),
            ParamSpec(
                name=pre + "self_attention.linear_proj.weight",
                shape=(h, q_rows),
                split=1,
                layer=layer,
            ),
            ParamSpec(name=pre + "pre_mlp_layernorm.weight", shape=(h,), layer=layer),
            ParamSpec(
                name=pre + "mlp.linear_fc1.weight",
                shape=(2 * f, h),
                split=0,
                parts=(f, f),
                layer=layer,
            ),
            ParamSpec(name=pre + "mlp.linear_fc2.weight", shape=(h, f), split=1, layer=layer),
        ]
    specs += [
        ParamSpec(name="decoder.final_layernorm.weight", shape=(h,), place="last"),
        ParamSpec(name="output_layer.weight", shape=(shape.vocab_size, h), split=0, place="last"),
    ]
    return specs


def hf_llama_shape(config: Any) -> LlamaShape:
    """The :class:`LlamaShape` of a transformers Llama config."""
    return LlamaShape(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        num_kv_heads=config.num_key_value_heads,
        head_size=getattr(config, "head_dim", None),
    )


def hf_sources(shape: LlamaShape, *, tied: bool = False) -> dict[str, tuple[str, ...]]:
    """Each megatron-format weight's HF source weights (``tied``: no ``lm_head.weight``).

    :func:`megatron_weight` builds the weight from them; a receiver that gets
    HF tensors one at a time converts each megatron weight as soon as its sources arrived.
    """
    embed = "model.embed_tokens.weight"
    out = {
        "embedding.word_embeddings.weight": (embed,),
        "decoder.final_layernorm.weight": ("model.norm.weight",),
        "output_layer.weight": (embed,) if tied else ("lm_head.weight",),
    }
    for layer in range(shape.num_layers):
        hf, mg = f"model.layers.{layer}.", f"decoder.layers.{layer}."
        out[mg + "input_layernorm.weight"] = (hf + "input_layernorm.weight",)
        out[mg + "pre_mlp_layernorm.weight"] = (hf + "post_attention_layernorm.weight",)
        out[mg + "self_attention.linear_qkv.weight"] = tuple(
            hf + f"self_attn.{x}_proj.weight" for x in "qkv"
        )
        out[mg + "self_attention.linear_proj.weight"] = (hf + "self_attn.o_proj.weight",)
        out[mg + "mlp.linear_fc1.weight"] = (hf + "mlp.gate_proj.weight", hf + "mlp.up_proj.weight")
        out[mg + "mlp.linear_fc2.weight"] = (hf + "mlp.down_proj.weight",)
    return out


def megatron_weight(
    name: str, sources: tuple[torch.Tensor, ...], shape: LlamaShape
) -> torch.Tensor:
    """The full megatron-format weight ``name`` from its :func:`hf_sources` tensors, in order."""
    import torch

    if name.endswith("linear_qkv.weight"):
        return grouped_qkv(*sources, shape.num_kv_heads)
    if name.endswith("linear_fc1.weight"):
        return torch.cat(sources)
    (only,) = sources
    return only


def hf_llama_to_megatron(
    state: Mapping[str, torch.Tensor], shape: LlamaShape
) -> dict[str, torch.Tensor]:
    """Full megatron-format weights (grouped QKV, fused gate/up) from an HF Llama state dict."""
    sources = hf_sources(shape, tied="lm_head.weight" not in state)
    return {
        name: megatron_weight(name, tuple(state[hf] for hf in needed), shape)
        for name, needed in sources.items()
    }


def megatron_to_hf_local(
    shard: Mapping[str, torch.Tensor], shape: LlamaShape, tg: int
) -> Iterator[tuple[str, torch.Tensor]]:
    """A generation shard (megatron names, tp size ``tg``) as HF-named local slices.

    ``q_proj``/``k_proj``/``v_proj`` hold this rank's heads, ``gate_proj``/
    ``up_proj`` its rows of the MLP, ``o_proj``/``down_proj`` its columns, the
    embedding and ``lm_head`` its vocabulary rows: exactly what a tensor-parallel
    rank of an HF-layout engine (e.g. vLLM at tensor_parallel_size = tg) holds.
    Views where possible (no copy).
    """
    heads, kv_heads = shape.num_heads // tg, shape.num_kv_heads // tg
    renames = {
        "embedding.word_embeddings.weight": "model.embed_tokens.weight",
        "decoder.final_layernorm.weight": "model.norm.weight",
        "output_layer.weight": "lm_head.weight",
    }
    for name, tensor in shard.items():
        if name in renames:
            yield renames[name], tensor
            continue
        _, _, layer, rest = name.split(".", 3)
        hf = f"model.layers.{layer}."
        if rest == "self_attention.linear_qkv.weight":
            q, k, v = split_grouped_qkv(tensor, heads, kv_heads)
            yield hf + "self_attn.q_proj.weight", q
            yield hf + "self_attn.k_proj.weight", k
            yield hf + "self_attn.v_proj.weight", v
        elif rest == "mlp.linear_fc1.weight":
            gate, up = tensor.chunk(2)
            yield hf + "mlp.gate_proj.weight", gate
            yield hf + "mlp.up_proj.weight", up
        else:
            yield hf + _HF_LAYER_NAMES[rest], tensor


_HF_LAYER_NAMES = {
    "input_layernorm.weight": "input_layernorm.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
    "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
    "mlp.linear_fc2.weight": "mlp.down_proj.weight",
}


def grouped_qkv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_kv_heads: int
) -> torch.Tensor:
    """Megatron's fused QKV rows from separate q, k, v weights: ``[q_g; k_g; v_g]`` per group."""
    import torch

    groups = []
    for qg, kg, vg in zip(
        q.chunk(num_kv_heads), k.chunk(num_kv_heads), v.chunk(num_kv_heads), strict=True
    ):
        groups += [qg, kg, vg]
    return torch.cat(groups)


def split_grouped_qkv(
    qkv: torch.Tensor, num_heads: int, num_kv_heads: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of :func:`grouped_qkv` for a slice holding ``num_kv_heads`` whole groups."""
    import torch

    per_group = qkv.shape[0] // num_kv_heads
    head_dim = per_group // (num_heads // num_kv_heads + 2)
    q_rows = per_group - 2 * head_dim
    qs, ks, vs = [], [], []
    for group in qkv.split(per_group):
        qg, kg, vg = group.split([q_rows, head_dim, head_dim])
        qs.append(qg)
        ks.append(kg)
        vs.append(vg)
    return torch.cat(qs), torch.cat(ks), torch.cat(vs)
