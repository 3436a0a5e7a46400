"""HF Llama / Qwen2 state dicts ↔ megatron-core GPT tensor/pipeline shards (written here).

Choice: a converter of our own rather than megatron-bridge or verl's. The
bridge pulls NeMo-side dependencies and newer megatron-core releases than
Python 3.11 can install; verl's converters are tied to its own model
registry. The mapping is small and fully determined by the layer spec:

- ``linear_qkv``: one row block per key/value head group ``g``: the group's
  ``heads_per_group`` query heads, then its key head, then its value head
  (``head_dim`` rows each). Tensor-parallel rank ``r`` holds the groups
  ``[r·G/tp, (r+1)·G/tp)``, so grouped-query attention splits cleanly when
  ``tp`` divides the key/value heads. Qwen2's q/k/v biases follow the same
  order.
- ``linear_fc1``: SwiGLU's gate and up projections fused as
  ``[gate_r; up_r]`` per rank (megatron's GLU chunks the local output in two).
- ``linear_proj`` / ``linear_fc2``: split along the input dimension (row parallel).
- ``word_embeddings`` / ``output_layer``: split along the vocabulary, padded
  with zero rows to a multiple of ``tp`` (padded logits are masked to −inf
  where log-probabilities are computed, see :mod:`.vocab_parallel`).
- Pipeline stage ``p`` holds layers ``[p·L/pp, (p+1)·L/pp)`` renumbered from 0,
  the embedding on the first stage, the final norm and the output layer
  (or value/score head) on the last. A tied output layer at ``pp > 1`` is a
  copy of the embedding on the last stage (its gradient is summed with the
  first stage's).

The same functions convert optimizer moments (same shapes as the weights),
which is how checkpoints reload at another layout.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Literal

import torch

from hfsdk import HfsdkError
from hfsdk_backend_megatron.arch import ModelShape

Head = Literal["lm", "value", "score"]
HEADS: tuple[str, ...] = ("lm", "value", "score")

log = logging.getLogger(__name__)

_LAYER_NORMS = {
    "input_layernorm.weight": "input_layernorm.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
}


def _rows(tensor: torch.Tensor, rank: int, parts: int, dim: int = 0) -> torch.Tensor:
    return tensor.chunk(parts, dim=dim)[rank].clone()


def _pad_vocab(weight: torch.Tensor, padded: int) -> torch.Tensor:
    if weight.shape[0] == padded:
        return weight
    extra = weight.new_zeros((padded - weight.shape[0], *weight.shape[1:]))
    return torch.cat([weight, extra])


def layers_of_stage(shape: ModelShape, pp: int, pp_rank: int) -> range:
    """The global layer numbers pipeline stage ``pp_rank`` holds."""
    per = shape.num_layers // pp
    return range(pp_rank * per, (pp_rank + 1) * per)


def _fuse_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shape: ModelShape) -> torch.Tensor:
    """Megatron's per-group [q heads, k, v] order from separate HF projections (dim 0)."""
    groups, per, dim = shape.num_kv_heads, shape.heads_per_group, shape.head_dim
    rest = q.shape[1:]
    qg = q.reshape(groups, per * dim, *rest)
    kg = k.reshape(groups, dim, *rest)
    vg = v.reshape(groups, dim, *rest)
    return torch.cat([qg, kg, vg], dim=1).reshape(-1, *rest)


def _split_qkv(
    fused: torch.Tensor, shape: ModelShape
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of :func:`_fuse_qkv` on the full (all-rank) fused tensor."""
    groups, per, dim = shape.num_kv_heads, shape.heads_per_group, shape.head_dim
    rest = fused.shape[1:]
    grouped = fused.reshape(groups, (per + 2) * dim, *rest)
    q, k, v = grouped.split([per * dim, dim, dim], dim=1)
    return (
        q.reshape(-1, *rest).contiguous(),
        k.reshape(-1, *rest).contiguous(),
        v.reshape(-1, *rest).contiguous(),
    )


def to_megatron(
    hf: Mapping[str, torch.Tensor],
    shape: ModelShape,
    *,
    tp: int,
    tp_rank: int,
    pp: int,
    pp_rank: int,
    head: Head = "lm",
) -> dict[str, torch.Tensor]:
    """This (tp_rank, pp_rank)'s megatron-core parameters from a full HF state dict."""
    if head not in HEADS:
        raise HfsdkError(f"head {head!r} is unknown; expected one of {HEADS}")
    out: dict[str, torch.Tensor] = {}
    padded = shape.padded_vocab(tp)
    embed = hf["model.embed_tokens.weight"]
    if pp_rank == 0:
        out["embedding.word_embeddings.weight"] = _rows(_pad_vocab(embed, padded), tp_rank, tp)
    for local, layer in enumerate(layers_of_stage(shape, pp, pp_rank)):
        src, dst = f"model.layers.{layer}.", f"decoder.layers.{local}."
        attn = src + "self_attn."
        fused = _fuse_qkv(
            hf[attn + "q_proj.weight"],
            hf[attn + "k_proj.weight"],
            hf[attn + "v_proj.weight"],
            shape,
        )
        out[dst + "self_attention.linear_qkv.weight"] = _rows(fused, tp_rank, tp)
        if shape.qkv_bias:
            fused_bias = _fuse_qkv(
                hf[attn + "q_proj.bias"], hf[attn + "k_proj.bias"], hf[attn + "v_proj.bias"], shape
            )
            out[dst + "self_attention.linear_qkv.bias"] = _rows(fused_bias, tp_rank, tp)
        out[dst + "self_attention.linear_proj.weight"] = _rows(
            hf[attn + "o_proj.weight"], tp_rank, tp, dim=1
        )
        gate = _rows(hf[src + "mlp.gate_proj.weight"], tp_rank, tp)
        up = _rows(hf[src + "mlp.up_proj.weight"], tp_rank, tp)
        out[dst + "mlp.linear_fc1.weight"] = torch.cat([gate, up])
        out[dst + "mlp.linear_fc2.weight"] = _rows(hf[src + "mlp.down_proj.weight"], tp_rank, tp, 1)
        for mname, hname in _LAYER_NORMS.items():
            out[dst + mname] = hf[src + hname].clone()
    if pp_rank == pp - 1:
        out["decoder.final_layernorm.weight"] = hf["model.norm.weight"].clone()
        if head == "lm":
            if not shape.tie_embeddings:
                out["output_layer.weight"] = _rows(
                    _pad_vocab(hf["lm_head.weight"], padded), tp_rank, tp
                )
            elif pp > 1:
                out["output_layer.weight"] = _rows(_pad_vocab(embed, padded), tp_rank, tp)
        else:
            out.update(_scalar_head(hf, head, warn=tp_rank == 0))
    return out


def _scalar_head(
    hf: Mapping[str, torch.Tensor], head: Head, *, warn: bool
) -> dict[str, torch.Tensor]:
    """The value/score head's parameters that ``hf`` holds (a missing one starts fresh).

    Only the value head has a bias: a score head ignores ``score.bias`` (a critic's
    token-classification directory loaded as a scorer), as transformers does on fsdp.
    """
    out: dict[str, torch.Tensor] = {}
    if "score.weight" in hf:
        out["output_layer.weight"] = hf["score.weight"].clone()
    if "score.bias" in hf:
        if head == "value":
            out["output_layer.bias"] = hf["score.bias"].clone()
        elif warn:  # once per stage: every tensor-parallel rank converts the same head
            log.warning(
                "the checkpoint's score.bias is ignored: a %s head has no bias, so only "
                "score.weight is loaded (as the fsdp backend does)",
                head,
            )
    return out


def to_hf(
    shards: Mapping[tuple[int, int], Mapping[str, torch.Tensor]],
    shape: ModelShape,
    *,
    tp: int,
    pp: int,
    head: Head = "lm",
) -> dict[str, torch.Tensor]:
    """The full HF state dict from every rank's shard, keyed ``(pp_rank, tp_rank)``.

    Inverse of :func:`to_megatron`: ``to_hf(to_megatron(hf, …) for every
    rank) == hf`` exactly (bit for bit), vocabulary padding removed.
    """
    missing = [(p, t) for p in range(pp) for t in range(tp) if (p, t) not in shards]
    if missing:
        raise HfsdkError(f"megatron shards {missing} (pp_rank, tp_rank) are missing")

    def stage(p: int) -> list[Mapping[str, torch.Tensor]]:
        return [shards[(p, t)] for t in range(tp)]

    hf = embedding_to_hf(stage(0), shape)
    for p in range(pp):
        for local, layer in enumerate(layers_of_stage(shape, pp, p)):
            hf.update(layer_to_hf(stage(p), shape, local=local, layer=layer))
    hf.update(final_to_hf(stage(pp - 1), shape, head=head))
    return hf


def embedding_to_hf(
    parts: list[Mapping[str, torch.Tensor]], shape: ModelShape
) -> dict[str, torch.Tensor]:
    """The HF embedding from the first stage's tensor-parallel shards (``parts[tp_rank]``)."""
    name = "embedding.word_embeddings.weight"
    full = torch.cat([part[name] for part in parts])
    return {"model.embed_tokens.weight": full[: shape.vocab_size].clone()}


def layer_to_hf(
    parts: list[Mapping[str, torch.Tensor]], shape: ModelShape, *, local: int, layer: int
) -> dict[str, torch.Tensor]:
    """HF tensors of global layer ``layer`` from its stage's tp shards (local number ``local``)."""
    src, dst = f"decoder.layers.{local}.", f"model.layers.{layer}."

    def cat(name: str, dim: int = 0) -> torch.Tensor:
        return torch.cat([part[src + name] for part in parts], dim=dim)

    hf: dict[str, torch.Tensor] = {}
    attn = dst + "self_attn."
    q, k, v = _split_qkv(cat("self_attention.linear_qkv.weight"), shape)
    hf[attn + "q_proj.weight"], hf[attn + "k_proj.weight"] = q, k
    hf[attn + "v_proj.weight"] = v
    if shape.qkv_bias:
        qb, kb, vb = _split_qkv(cat("self_attention.linear_qkv.bias"), shape)
        hf[attn + "q_proj.bias"], hf[attn + "k_proj.bias"] = qb, kb
        hf[attn + "v_proj.bias"] = vb
    hf[attn + "o_proj.weight"] = cat("self_attention.linear_proj.weight", 1)
    halves = [part[src + "mlp.linear_fc1.weight"].chunk(2) for part in parts]
    hf[dst + "mlp.gate_proj.weight"] = torch.cat([h[0] for h in halves])
    hf[dst + "mlp.up_proj.weight"] = torch.cat([h[1] for h in halves])
    hf[dst + "mlp.down_proj.weight"] = cat("mlp.linear_fc2.weight", 1)
    for mname, hname in _LAYER_NORMS.items():
        hf[dst + hname] = parts[0][src + mname].clone()
    return hf


def final_to_hf(
    parts: list[Mapping[str, torch.Tensor]], shape: ModelShape, *, head: Head = "lm"
) -> dict[str, torch.Tensor]:
    """The final norm and the output layer (or value/score head) from the last stage's shards.

    A tied output layer is not returned (HF names it once, as the embedding).
    """
    last = parts[0]
    hf = {"model.norm.weight": last["decoder.final_layernorm.weight"].clone()}
    if head == "lm":
        if not shape.tie_embeddings:
            full = torch.cat([part["output_layer.weight"] for part in parts])
            hf["lm_head.weight"] = full[: shape.vocab_size].clone()
    else:
        for name in ("weight", "bias"):
            if f"output_layer.{name}" in last:
                hf[f"score.{name}"] = last[f"output_layer.{name}"].clone()
    return hf


SPLIT_DIMS: dict[str, int | None] = {
    "embedding.word_embeddings.weight": 0,
    "self_attention.linear_qkv.weight": 0,
    "self_attention.linear_qkv.bias": 0,
    "self_attention.linear_proj.weight": 1,
    "mlp.linear_fc1.weight": 0,
    "mlp.linear_fc2.weight": 1,
    "output_layer.weight": 0,
}
"""Which dimension of a megatron parameter is split across tensor-parallel ranks (by suffix)."""


def tp_split_dim(name: str, head: Head = "lm") -> int | None:
    """The tensor-parallel split dimension of megatron parameter ``name`` (``None``: replicated)."""
    if head != "lm" and name.startswith("output_layer."):
        return None
    for suffix, dim in SPLIT_DIMS.items():
        if name.endswith(suffix):
            return dim
    return None
