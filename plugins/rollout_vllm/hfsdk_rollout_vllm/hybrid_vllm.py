"""vLLM generation for an actor that reshards through the 3D-HybridEngine (megatron).

Every actor rank holds a vLLM engine. When the actor's weights changed (an
update or a checkpoint load), the next rollout streams this rank's generation
shard out of :meth:`HybridEngine.stream_generation` (the micro-DP transition,
one weight at a time), renames each weight to HF names and reloads it into the
engine in place; the engine's own copy is then the only full set of
generation weights on the rank. Each of the ``dg`` generation replicas of a
training replica decodes its share of the replica's prompts and the shares
are gathered in the micro-DP group, as :class:`HybridRollout` does with its
own decoder.

With tg > 1 the engine runs vLLM tensor parallelism over the generation
tensor-parallel group (``distributed_executor_backend="external_launcher"``:
the engine joins the actor's torch.distributed world). vLLM forms its
tensor-parallel groups from consecutive ranks, which are the generation
groups only when tg equals the training tp (:func:`vllm_layout_problem`). vLLM's
loaders take checkpoint-format (full) tensors and cut their own slice, so at
tg > 1 each generation weight is all-gathered over the tg ranks, one weight
at a time, before it is handed over.

The module imports the megatron plugin; it is loaded only when the megatron
worker builds the rollout (:meth:`VLLMRollout.from_hybrid_engine`), so the
fsdp-only use of this plugin does not need megatron installed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import attrs
import torch
import torch.distributed as dist

from hfsdk import Batch, HfsdkError, RolloutLayoutConfig
from hfsdk_backend_common.hybrid.llama_format import megatron_to_hf_local
from hfsdk_backend_megatron.hybrid_rollout import HybridRollout, hybrid_supported
from hfsdk_rollout_vllm.checks import require_servable
from hfsdk_rollout_vllm.vllm_rollout import LOG_PROB_KEY, SEED_RANGE, generate_rows

if TYPE_CHECKING:
    from hfsdk import GenLayout, TrainLayout
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

logger = logging.getLogger(__name__)

VOCAB_WEIGHTS = ("model.embed_tokens.weight", "lm_head.weight")
"""HF weights whose rows are the vocabulary (megatron pads them to a multiple of tp)."""


def vllm_layout_problem(train: TrainLayout, gen: GenLayout) -> str | None:
    """Why vLLM cannot generate at layout ``gen`` inside the actor's world (None: it can).

    The engine is fed one whole-model shard per rank (no generation pipeline
    stages). vLLM (external launcher) groups ranks ``[0..tg-1], [tg..2tg-1],
    ...`` into its tensor-parallel groups; the generation groups of the
    3D-HybridEngine are consecutive ranks only when tg is 1 or the training tp.
    """
    if gen.pg != 1:
        return (
            f"rollout.backend=vllm with actor.rollout_layout.pp={gen.pg}: the vLLM engine is "
            "fed one whole-model generation shard per rank; set actor.rollout_layout.pp=1"
        )
    if gen.tg in (1, train.t):
        return None
    return (
        f"rollout.backend=vllm with actor.rollout_layout.tp={gen.tg} and training tp={train.t}: "
        "vLLM's tensor-parallel groups are consecutive ranks, the generation groups of this "
        f"layout are not; use actor.rollout_layout.tp=1 or {train.t}"
    )


def usable_rollout_layout(layout: RolloutLayoutConfig, train_tp: int) -> RolloutLayoutConfig:
    """``layout`` without a planner's rollout tp that vLLM cannot take (logged), else as is.

    ``placement.mode: auto`` may plan a rollout tp between 1 and the training
    tp; the 3D-HybridEngine could regroup into it, vLLM's consecutive-rank
    groups cannot (:func:`vllm_layout_problem`), so the configured layout is used.
    """
    planned = layout.planned_tp
    if planned is None or planned in (1, train_tp):
        return layout
    logger.warning(
        "placement: auto planned rollout tp=%d, which the vllm rollout cannot take at training "
        "tp=%d (only 1 or %d); using actor.rollout_layout as configured",
        planned,
        train_tp,
        train_tp,
    )
    return attrs.evolve(layout, planned_tp=None)


class HybridVLLMRollout(HybridRollout):
    """``generate_sequences`` by vLLM engines fed from the 3D-HybridEngine's generation shards.

    Collective over the actor's ranks (every rank calls it). Keeps the
    ``vllm`` rollout's contract: ``rollout_log_probs`` and per-request seeds
    drawn from torch's global generator (restored on resume).
    """

    config: VLLMRolloutConfig

    def __init__(self, config: VLLMRolloutConfig, engine: MegatronEngine) -> None:
        why_not = hybrid_supported(engine)
        if why_not:
            raise HfsdkError(f"rollout.backend=vllm with actor.backend=megatron: {why_not}")
        layout = usable_rollout_layout(engine.config.rollout_layout, engine.tp)
        if layout is not engine.config.rollout_layout:
            engine.config = attrs.evolve(engine.config, rollout_layout=layout)
        super().__init__(config, engine)
        problem = vllm_layout_problem(self.train, self.gen)
        if problem:
            raise HfsdkError(problem)
        from hfsdk_rollout_vllm.engine import ColocatedEngine

        on_cpu = engine.device.type == "cpu"
        require_servable(engine.model_dir, on_cpu)
        shape = engine.shape
        self.hf_shape = self.llama_shape(shape.vocab_size)  # HF's rows: no tp padding
        self.spec_of = {spec.name: spec for spec in self.hybrid.specs}
        dtype = engine.dtype if config.dtype == "auto" else getattr(torch, config.dtype)
        if self.gen.tg > 1:
            # The external launcher reads the rank from the environment (the world exists);
            # on CUDA the local rank picks the device: the one this process already uses.
            local = torch.cuda.current_device() if not on_cpu else dist.get_rank()
            os.environ.update(
                RANK=str(dist.get_rank()),
                LOCAL_RANK=str(local),
                WORLD_SIZE=str(dist.get_world_size()),
            )
        # The engine starts from the model directory, which is where the actor started too.
        self.vllm = ColocatedEngine(
            config, engine.model_dir, dtype, on_cpu, tensor_parallel_size=self.gen.tg
        )
        self.weights_stale = False
        self.weight_updates = 0
        self.reload_metrics: dict[str, float] = {
            "timing/reshard_s": 0.0,
            "perf/reshard_bytes": 0.0,
            "perf/reshard_peak_extra_bytes": 0.0,
            "perf/reshard_tp_gather_bytes": 0.0,
        }
        """The transition that brought the engine its current weights (zeros: the start's).

        Every rollout reports it, so an algorithm that generates twice a step
        (ReMax: greedy baseline, then samples) logs the step's reload whichever
        call did it."""

    def weights_changed(self) -> None:
        """The actor's weights changed (update, checkpoint load): reload before the next rollout."""
        self.weights_stale = True

    def close(self) -> None:
        """Shut the vLLM engine down (in-process workers stop; see ``Worker.close``)."""
        self.vllm.close()

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """This training replica's responses and their log-probs, one share per gen replica."""
        started = time.perf_counter()
        if self.weights_stale:
            self.reload_metrics = self.reload_weights()
        # Drawn for the whole replica batch on every rank, greedy or not: each rank's
        # generator advances alike whatever its share (exact resume).
        seeds = torch.randint(SEED_RANGE, (len(prompts),))
        if self.gen.tg > 1:
            # vLLM's tensor-parallel ranks must run identical requests.
            dist.broadcast(seeds, src=self.tp_ranks[0], group=self.groups.gen_tp)
        rows = torch.arange(len(prompts)).tensor_split(self.gen.dg)[self.hybrid.place.k]
        responses, log_probs = generate_rows(
            self.vllm,
            self.config,
            self.eos_ids,
            self.tokenizer.pad_token_id,
            prompts["input_ids"][rows],
            prompts["attention_mask"][rows],
            seeds[rows].tolist(),
            greedy,
        )
        self.vllm.sleep()  # the actor trains next (CUDA: the KV cache is released)
        if self.gen.dg > 1:
            shares: list[Any] = [None] * self.gen.dg
            dist.all_gather_object(shares, (responses, log_probs), group=self.groups.micro_dp)
            responses = torch.cat([share[0] for share in shares])
            log_probs = torch.cat([share[1] for share in shares])
        self.last_metrics = {
            **self.reload_metrics,
            "timing/generate_s": time.perf_counter() - started,
        }
        return responses, {LOG_PROB_KEY: log_probs}

    def reload_weights(self) -> dict[str, float]:
        """Load the actor's current weights into the engine now; the transition's metrics.

        Streams this rank's generation shard (collective over the actor's ranks).
        """
        self.tp_gather_bytes = 0
        self.tp_gather_peak = 0
        try:
            stream = self.hybrid.stream_generation(self.training_shard())
            self.vllm.reload_weights(self.hf_weights(stream))
        finally:
            self.hybrid.to_training()
        self.weights_stale = False
        self.weight_updates += 1
        metrics = self.hybrid.stats.metrics()
        # Both happen one weight at a time; their sum bounds what was held at once.
        peak = metrics["perf/reshard_peak_extra_bytes"] + float(self.tp_gather_peak)
        return {
            **metrics,
            "perf/reshard_peak_extra_bytes": peak,
            "perf/reshard_tp_gather_bytes": float(self.tp_gather_bytes),
        }

    def hf_weights(
        self, generation: Iterable[tuple[str, torch.Tensor]]
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """(HF name, tensor) pairs of generation weights, as vLLM's loaders take them.

        The vocabulary padding is cut off; at tg > 1 each weight is first
        gathered whole over the generation tensor-parallel group.
        """
        vocab = self.hf_shape.vocab_size
        for name, tensor in generation:
            full = self._gather_full(name, tensor)
            for hf_name, hf_tensor in megatron_to_hf_local({name: full}, self.hf_shape, tg=1):
                yield hf_name, hf_tensor[:vocab] if hf_name in VOCAB_WEIGHTS else hf_tensor

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
        self.tp_gather_bytes += whole - tensor.numel() * tensor.element_size()
        # Held at once: the gathered pieces and the whole weight they are put together into.
        self.tp_gather_peak = max(self.tp_gather_peak, 2 * whole)
        sizes = [size // tg for size in spec.part_sizes]
        split = [piece.split(sizes, dim=spec.split) for piece in pieces]
        # Part by part into the whole weight's rows (fused QKV groups, gate then up).
        order = [s[i] for i in range(len(sizes)) for s in split]
        return torch.cat(order, dim=spec.split)
