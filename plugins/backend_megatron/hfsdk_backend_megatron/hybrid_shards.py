"""The megatron actor's generation shards through the 3D-HybridEngine (the rollout contract's).

Every rank of the actor takes part: its training shard (``named_tp_shards``)
is resharded into the generation layout ``actor.rollout_layout`` inside its
micro-DP group, the ``dg`` generation replicas of a training replica each
decode their share of the replica's prompts at tensor-parallel size tg over
pg pipeline stages (:meth:`HybridShards.prompt_rows`), the shares are
gathered inside the micro-DP group (:meth:`HybridShards.own_rows`), and the
gathered parts are dropped again before training. A rollout engine with its
own copy of the weights (vLLM) streams them instead (:meth:`HybridShards.hf_stream`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hfsdk_backend_common.hybrid.decoder import DecoderShape
from hfsdk_backend_common.hybrid.groups import create_groups
from hfsdk_backend_common.hybrid.layout import (
    HeadShape,
    TrainLayout,
    generation_pp_groups,
    generation_tp_groups,
)
from hfsdk_backend_common.hybrid.layout_config import resolve_rollout_layout
from hfsdk_backend_common.hybrid.llama_format import LlamaShape, llama_specs, megatron_to_hf_local
from hfsdk_backend_common.hybrid.reshard import HybridEngine
from hfsdk_backend_common.hybrid.shards import GenerationShards
from hfsdk_backend_common.hybrid.stages import StageLink

if TYPE_CHECKING:
    from hfsdk_backend_megatron.engine import MegatronEngine

_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")

VOCAB_WEIGHTS = ("model.embed_tokens.weight", "lm_head.weight")
"""HF weights whose rows are the vocabulary (megatron pads them to a multiple of tp)."""


def hybrid_supported(engine: MegatronEngine) -> str | None:
    """Why the 3D-HybridEngine cannot reshard this actor (``None`` when it can)."""
    shape = engine.shape
    if shape.family != "llama" or shape.qkv_bias:
        return f"the hybrid engine reshards Llama models without biases, not {shape.family!r}"
    if shape.tie_embeddings:
        return "the hybrid engine needs an untied output layer (tie_word_embeddings: false)"
    return None


class HybridShards(GenerationShards):
    """This rank of the megatron actor in its generation layout (groups built once)."""

    def __init__(self, engine: MegatronEngine) -> None:
        self.engine = engine
        shape = engine.shape
        world = dist.get_world_size()
        self.train = TrainLayout(engine.pp, engine.tp, world // (engine.pp * engine.tp))
        heads = HeadShape(
            num_layers=shape.num_layers, num_heads=shape.num_heads, num_kv_heads=shape.num_kv_heads
        )
        layout = engine.config.rollout_layout
        self.gen = resolve_rollout_layout(self.train, layout, heads, planned_tp=layout.planned_tp)
        self.layers_per_stage = shape.num_layers // engine.pp
        self.specs = llama_specs(self.llama_shape(shape.padded_vocab(engine.tp)))
        self.shape = DecoderShape(
            num_layers=shape.num_layers,
            hidden_size=shape.hidden_size,
            num_heads=shape.num_heads,
            num_kv_heads=shape.num_kv_heads,
            head_dim=shape.head_dim,
            vocab_size=shape.vocab_size,
            rms_norm_eps=shape.norm_eps,
            rope_theta=shape.rope_theta,
        )
        rank = dist.get_rank()
        self.groups = create_groups(self.train, self.gen)
        self.tp_ranks = tuple(
            next(g for g in generation_tp_groups(self.train, self.gen) if rank in g)
        )
        pp_ranks = next(g for g in generation_pp_groups(self.train, self.gen) if rank in g)
        self.stages = StageLink(ranks=pp_ranks, rank=rank, group=self.groups.gen_pp)
        self.hybrid = HybridEngine(
            train=self.train,
            gen=self.gen,
            specs=self.specs,
            num_layers=shape.num_layers,
            rank=rank,
            micro_dp=self.groups.micro_dp,
            # Nothing trains or reads the training shard between weights() and release()
            # (the rollout releases in a finally): the own slices live only in the
            # generation shard meanwhile.
            lend_training=True,
        )
        self.tg, self.pg = self.gen.tg, self.gen.pg
        self.tp_rank = self.hybrid.place.gen_tp
        self.tp_group = self.groups.gen_tp
        self.hf_shape = self.llama_shape(shape.vocab_size)  # HF's rows: no tp padding
        self.spec_of = {spec.name: spec for spec in self.hybrid.specs}
        self._stream_metrics: dict[str, float] = {}

    def llama_shape(self, vocab_size: int) -> LlamaShape:
        """The actor model's shape for the hybrid engine, with ``vocab_size`` rows."""
        shape = self.engine.shape
        return LlamaShape(
            vocab_size=vocab_size,
            hidden_size=shape.hidden_size,
            intermediate_size=shape.ffn_hidden_size,
            num_layers=shape.num_layers,
            num_heads=shape.num_heads,
            num_kv_heads=shape.num_kv_heads,
            head_size=shape.head_dim,
        )

    def training_shard(self) -> dict[str, torch.Tensor]:
        """This rank's weights under global megatron names (views, no copy)."""
        offset = self.engine.pp_rank * self.layers_per_stage
        shard = {}
        for name, entry in self.engine.named_tp_shards().items():
            match = _LAYER.match(name)
            if match:
                name = f"decoder.layers.{int(match.group(1)) + offset}." + name[match.end() :]
            shard[name] = entry["tensor"].detach()
        return shard

    # -- the contract -------------------------------------------------------------------

    def prompt_rows(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pad_id: int,
        per_row: Sequence[torch.Tensor] = (),
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """Generation replica k of this training replica decodes the k-th share of its prompts."""
        rows = torch.arange(len(input_ids)).tensor_split(self.gen.dg)[self.hybrid.place.k]
        return input_ids[rows], attention_mask[rows], [t[rows] for t in per_row]

    def own_rows(self, columns: list[torch.Tensor]) -> list[torch.Tensor]:
        """Every share of the training replica, gathered in the micro-DP group (dg > 1)."""
        if self.gen.dg == 1:
            return columns
        shares: list[Any] = [None] * self.gen.dg
        dist.all_gather_object(shares, [c.cpu() for c in columns], group=self.groups.micro_dp)
        return [torch.cat([share[i] for share in shares]) for i in range(len(columns))]

    def weights(self) -> dict[str, torch.Tensor]:
        """The micro-DP transition: this rank's generation shard (megatron names)."""
        self._stream_metrics = {}
        return self.hybrid.to_generation(self.training_shard())

    def release(self) -> None:
        """Drop the gathered parts; the training shard is all that is left."""
        self.hybrid.to_training()

    def metrics(self) -> dict[str, float]:
        """The last transition's cost on this rank (plus the tg gather of a stream)."""
        metrics = self.hybrid.stats.metrics()
        if self._stream_metrics:
            peak = metrics["perf/reshard_peak_extra_bytes"] + self._stream_metrics["peak"]
            metrics = {
                **metrics,
                "perf/reshard_peak_extra_bytes": peak,
                "perf/reshard_tp_gather_bytes": self._stream_metrics["bytes"],
            }
        return metrics

    def hf_stream(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The generation weights as whole HF tensors (vocab padding cut), one at a time.

        At tg > 1 each weight is first gathered over the generation tensor
        group (what an engine that cuts its own slices, like vLLM, loads).
        """
        self._stream_metrics = {"bytes": 0.0, "peak": 0.0}
        vocab = self.hf_shape.vocab_size
        try:
            for name, tensor in self.hybrid.stream_generation(self.training_shard()):
                full = self._gather_full(name, tensor)
                pairs = megatron_to_hf_local({name: full}, self.hf_shape, tg=1)
                for hf_name, hf_tensor in pairs:
                    yield hf_name, hf_tensor[:vocab] if hf_name in VOCAB_WEIGHTS else hf_tensor
        finally:
            self.hybrid.to_training()

    def _gather_full(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """The whole weight from the tg generation slices (fused parts put back in order)."""
        spec = self.spec_of[name]
        tg = self.gen.tg
        if tg == 1 or spec.split is None:
            return tensor
        tensor = tensor.contiguous()
        pieces = [torch.empty_like(tensor) for _ in range(tg)]
        dist.all_gather(pieces, tensor, group=self.groups.gen_tp)
        whole = tg * tensor.numel() * tensor.element_size()
        self._stream_metrics["bytes"] += whole - tensor.numel() * tensor.element_size()
        # Held at once: the gathered pieces and the whole weight they are put together into.
        self._stream_metrics["peak"] = max(self._stream_metrics["peak"], 2.0 * whole)
        sizes = [size // tg for size in spec.part_sizes]
        split = [piece.split(sizes, dim=spec.split) for piece in pieces]
        # Part by part into the whole weight's rows (fused QKV groups, gate then up).
        order = [s[i] for i in range(len(sizes)) for s in split]
        return torch.cat(order, dim=spec.split)
