"""Build a rank's megatron-format generation slice straight from the FSDP2 shards.

One ``all_to_all_single`` per weight over the actor's data-parallel group:
every rank sends each peer exactly the rows (and, for row-parallel weights,
columns) of its own dim-0 shard that the peer's tensor-parallel slice needs
(:mod:`.tp_slices`), so no rank ever holds a full parameter. The pieces arrive
in source-rank order, which is row order, so the receive buffer *is* the
destination tensor — no reassembly copy — except for the fused QKV, whose
megatron rows interleave per key/value group (q/k/v land in temporaries and
are fused once). Weights are exchanged layer by layer; beyond the generation
slice a rank holds one weight's send buffer and one layer's q/k/v at a time.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs
import torch
import torch.distributed as dist

from hfsdk import HfsdkError
from hfsdk_backend_common.hybrid.llama_format import grouped_qkv
from hfsdk_backend_fsdp.tp_slices import fsdp_rows, piece_shape, region, tp_index

if TYPE_CHECKING:
    from torch import nn


@attrs.define
class SliceStats:
    """What one transition cost this rank (reported like the megatron engine's)."""

    seconds: float = 0.0
    received_bytes: int = 0
    generation_bytes: int = 0
    peak_extra_bytes: int = 0
    collectives: int = 0
    _transient: int = 0

    def hold(self, nbytes: int, *, keep: bool = False) -> None:
        """Account ``nbytes`` allocated (``keep``: part of the generation slice)."""
        if keep:
            self.generation_bytes += nbytes
        else:
            self._transient += nbytes
        self.peak_extra_bytes = max(self.peak_extra_bytes, self.generation_bytes + self._transient)

    def release(self, nbytes: int) -> None:
        """Account ``nbytes`` of transient buffers freed."""
        self._transient -= nbytes

    def metrics(self) -> dict[str, float]:
        """``timing/reshard_s``, ``perf/reshard_bytes`` and ``perf/reshard_peak_extra_bytes``."""
        return {
            "timing/reshard_s": self.seconds,
            "perf/reshard_bytes": float(self.received_bytes),
            "perf/reshard_peak_extra_bytes": float(self.peak_extra_bytes),
        }


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


class SliceExchange:
    """Exchanges FSDP2 dim-0 shards for tensor-parallel slices at ``tg`` (collective).

    ``group`` is the data-parallel group FSDP shards over (``world`` ranks,
    this one ``rank``); this rank is tensor rank :func:`~.tp_slices.tp_index`
    of its generation replica. Every rank must call
    :meth:`generation_shard` (the all-to-alls are collective).
    """

    def __init__(
        self, *, group: Any, world: int, rank: int, tg: int, dtype: torch.dtype,
        device: torch.device,
    ) -> None:  # fmt: skip
        self.group, self.world, self.rank, self.tg = group, world, rank, tg
        self.tp_rank = tp_index(rank, world, tg)
        self.dtype, self.device = dtype, device

    def exchange(
        self, name: str, local: torch.Tensor, shape: tuple[int, ...], stats: SliceStats,
        *, keep: bool = True, out: torch.Tensor | None = None,
    ) -> torch.Tensor:  # fmt: skip
        """This rank's slice of weight ``name`` (full ``shape``) from every rank's ``local`` rows.

        ``keep``: the result is part of the generation slice (else a temporary);
        ``out``: receive into this (contiguous, already accounted) tensor instead.
        """
        own = fsdp_rows(shape[0], self.world, self.rank)
        if tuple(local.shape) != (own[1] - own[0], *shape[1:]):
            raise HfsdkError(
                f"FSDP shard of {name} has shape {tuple(local.shape)} on rank {self.rank}; "
                f"expected rows {own} of {shape} (dim-0 chunks); shard the actor with the "
                "fsdp backend's default (fully_shard per block)"
            )
        mine = region(name, shape, self.tg, self.tp_rank)
        out_shape = (mine.rows, *shape[1:]) if mine.dim != 1 else (shape[0], mine.hi - mine.lo)
        if out is None:
            out = torch.empty(out_shape, dtype=self.dtype, device=self.device)
            stats.hold(_nbytes(out), keep=keep)
            if mine.dim == 0:
                out[mine.hi - mine.lo :] = 0  # the padded vocabulary rows (last tensor rank)
        elif tuple(out.shape) != out_shape or not out.is_contiguous():
            raise ValueError(f"out for {name} must be contiguous of shape {out_shape}")
        # What this rank sends each peer: its rows inside the peer's region.
        send_sizes, pieces = [], []
        for peer in range(self.world):
            want = region(name, shape, self.tg, tp_index(peer, self.world, self.tg))
            if want.dim == 0:
                lo, hi = max(own[0], want.lo), min(own[1], want.hi)
                piece = local[lo - own[0] : max(lo, hi) - own[0]]
            elif want.dim == 1:
                piece = local[:, want.lo : want.hi]
            else:
                piece = local
            pieces.append(piece)
            send_sizes.append(piece.numel())
        send = torch.empty(sum(send_sizes), dtype=self.dtype, device=self.device)
        stats.hold(_nbytes(send))
        offset = 0
        for piece, size in zip(pieces, send_sizes, strict=True):
            send[offset : offset + size].view(piece.shape).copy_(piece)  # casts to self.dtype
            offset += size
        recv_sizes = []
        for source in range(self.world):
            rows = fsdp_rows(shape[0], self.world, source)
            n = 1
            for s in piece_shape(mine, shape, rows):
                n *= s
            recv_sizes.append(n)
        # Pieces arrive in source order = row order: the real rows of ``out`` are the buffer.
        target = out.view(-1)[: sum(recv_sizes)]
        dist.all_to_all_single(target, send, recv_sizes, send_sizes, group=self.group)
        stats.collectives += 1
        stats.received_bytes += (sum(recv_sizes) - recv_sizes[self.rank]) * out.element_size()
        stats.release(_nbytes(send))
        del send
        return out

    def generation_shard(
        self, module: nn.Module, num_layers: int, num_kv_heads: int, stats: SliceStats
    ) -> dict[str, torch.Tensor]:
        """This rank's generation slice under megatron names (what ``TPDecoder`` reads)."""
        started = time.perf_counter()
        params = {name: p.detach() for name, p in module.named_parameters()}

        def take(name: str, *, keep: bool = True, out: torch.Tensor | None = None) -> torch.Tensor:
            param = params[name]
            local = param.to_local() if hasattr(param, "to_local") else param
            return self.exchange(name, local, tuple(param.shape), stats, keep=keep, out=out)

        kv_local = num_kv_heads // self.tg
        shard: dict[str, torch.Tensor] = {}
        embedding = take("model.embed_tokens.weight")
        shard["embedding.word_embeddings.weight"] = embedding
        for layer in range(num_layers):
            hf, mg = f"model.layers.{layer}.", f"decoder.layers.{layer}."
            shard[mg + "input_layernorm.weight"] = take(hf + "input_layernorm.weight")
            q, k, v = (take(hf + f"self_attn.{x}_proj.weight", keep=False) for x in "qkv")
            qkv = grouped_qkv(q, k, v, kv_local)  # megatron's rows: [q_g; k_g; v_g] per group
            stats.hold(_nbytes(qkv), keep=True)
            stats.release(_nbytes(q) + _nbytes(k) + _nbytes(v))
            del q, k, v
            shard[mg + "self_attention.linear_qkv.weight"] = qkv
            shard[mg + "self_attention.linear_proj.weight"] = take(hf + "self_attn.o_proj.weight")
            shard[mg + "pre_mlp_layernorm.weight"] = take(hf + "post_attention_layernorm.weight")
            # Megatron's fused fc1 is [gate_j; up_j]: each half receives in place.
            ffn, hidden = params[hf + "mlp.gate_proj.weight"].shape
            fc1 = torch.empty((2 * (ffn // self.tg), hidden), dtype=self.dtype, device=self.device)
            stats.hold(_nbytes(fc1), keep=True)
            gate, up = fc1.chunk(2)
            take(hf + "mlp.gate_proj.weight", out=gate)
            take(hf + "mlp.up_proj.weight", out=up)
            shard[mg + "mlp.linear_fc1.weight"] = fc1
            shard[mg + "mlp.linear_fc2.weight"] = take(hf + "mlp.down_proj.weight")
        shard["decoder.final_layernorm.weight"] = take("model.norm.weight")
        # Tied embeddings: the output layer's vocabulary rows are the embedding's.
        shard["output_layer.weight"] = (
            take("lm_head.weight") if "lm_head.weight" in params else embedding
        )
        stats.seconds = time.perf_counter() - started
        return shard
