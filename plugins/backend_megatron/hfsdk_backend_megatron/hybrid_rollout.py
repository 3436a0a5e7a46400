"""The megatron actor's rollout through the 3D-HybridEngine.

Every rank of the actor takes part: its training shard (``named_tp_shards``)
is resharded into the generation layout ``actor.rollout_layout`` inside its
micro-DP group, the ``dg`` generation replicas of a training replica each
decode their share of the replica's prompts with
:class:`~hfsdk_backend_common.hybrid.decoder.TPDecoder` at tensor-parallel size
tg over pg pipeline stages, the shares are gathered inside the micro-DP
group, and the gathered parts are dropped again before training. Output
rows follow the ``hf`` rollout's batch contract (it reuses its assembly).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hfsdk import (
    Batch,
    HeadShape,
    TrainLayout,
    generation_pp_groups,
    generation_tp_groups,
    resolve_rollout_layout,
)
from hfsdk_backend_common.generation import eos_token_ids
from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_common.hybrid.groups import create_groups
from hfsdk_backend_common.hybrid.llama_format import LlamaShape, llama_specs
from hfsdk_backend_common.hybrid.reshard import HybridEngine
from hfsdk_backend_common.hybrid.stages import StageLink
from hfsdk_backend_fsdp.hf_rollout import HFRollout

if TYPE_CHECKING:
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_megatron.engine import MegatronEngine

_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")


def hybrid_supported(engine: MegatronEngine) -> str | None:
    """Why the hybrid rollout cannot serve this actor (``None`` when it can)."""
    shape = engine.shape
    if shape.family != "llama" or shape.qkv_bias:
        return f"the hybrid rollout decodes Llama models without biases, not {shape.family!r}"
    if shape.tie_embeddings:
        return "the hybrid rollout needs an untied output layer (tie_word_embeddings: false)"
    return None


class HybridRollout(HFRollout):
    """``generate_sequences`` over the generation layout; collective over the actor's ranks."""

    collective = True
    """Every rank of the actor calls ``generate_sequences`` (not only the collectors)."""

    def __init__(self, config: HFRolloutConfig, engine: MegatronEngine) -> None:
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
        self.decoder_shape = DecoderShape(
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
        self.tp_ranks = next(g for g in generation_tp_groups(self.train, self.gen) if rank in g)
        pp_ranks = next(g for g in generation_pp_groups(self.train, self.gen) if rank in g)
        self.stages = StageLink(ranks=pp_ranks, rank=rank, group=self.groups.gen_pp)
        self.hybrid = HybridEngine(
            train=self.train,
            gen=self.gen,
            specs=self.specs,
            num_layers=shape.num_layers,
            rank=rank,
            micro_dp=self.groups.micro_dp,
            # Nothing trains or reads the training shard while the decoder runs (to_training
            # in a finally): the own slices live only in the generation shard meanwhile.
            lend_training=True,
        )
        super().__init__(config, engine, engine.tokenizer)  # type: ignore[arg-type]

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

    def _eos_ids(self) -> list[int]:
        from transformers import GenerationConfig

        try:
            configured = GenerationConfig.from_pretrained(str(self.engine.model_dir)).eos_token_id
        except OSError:
            configured = None
        return eos_token_ids(configured, self.tokenizer)

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

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Right-padded responses of this training replica's prompts (no extra columns)."""
        started = time.perf_counter()
        shard = self.hybrid.to_generation(self.training_shard())
        stats = self.hybrid.stats
        try:
            decoder = TPDecoder(
                shard,
                self.decoder_shape,
                tg=self.gen.tg,
                tp_rank=self.hybrid.place.gen_tp,
                tp_group=self.groups.gen_tp,
                tp_ranks=self.tp_ranks,
                stages=self.stages,
            )
            # Generation replica k of this training replica decodes the k-th share.
            rows = torch.arange(len(prompts)).tensor_split(self.gen.dg)[self.hybrid.place.k]
            ids = prompts["input_ids"][rows].to(self.engine.device)
            mask = prompts["attention_mask"][rows].to(self.engine.device)
            responses = self._decode(decoder, ids, mask, greedy)
        finally:
            self.hybrid.to_training()
        if self.gen.dg > 1:
            shares: list[Any] = [None] * self.gen.dg
            dist.all_gather_object(shares, responses, group=self.groups.micro_dp)
            responses = torch.cat(shares)
        self.last_metrics = {
            **stats.metrics(),
            "timing/generate_s": time.perf_counter() - started,
        }
        return responses, {}

    def _decode(
        self, decoder: TPDecoder, ids: torch.Tensor, mask: torch.Tensor, greedy: bool
    ) -> torch.Tensor:
        width = self.config.max_response_length
        pad = self.tokenizer.pad_token_id
        if len(ids) == 0:
            return torch.empty((0, width), dtype=torch.long)
        out = decoder.generate(
            ids,
            mask,
            max_new_tokens=width,
            eos_ids=self.eos_ids,
            pad_id=pad,
            greedy=greedy,
            sampling={
                "temperature": self.config.temperature,
                "top_k": self.config.top_k,
                "top_p": self.config.top_p,
            },
        )
        return out.cpu()

    def _agreed_metrics(self) -> dict[str, float]:
        """The transition's metrics maxed over every actor rank (the collectors' metas agree)."""
        metrics = dict(getattr(self, "last_metrics", {}))
        keys = sorted(metrics)
        values = torch.tensor([metrics[k] for k in keys], dtype=torch.float64)
        dist.all_reduce(values, op=dist.ReduceOp.MAX)
        return dict(zip(keys, values.tolist(), strict=True))
