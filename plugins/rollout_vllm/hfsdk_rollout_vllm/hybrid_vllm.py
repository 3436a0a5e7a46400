"""vLLM generation fed from the actor's generation shards (the 3D-HybridEngine).

Every actor rank holds a vLLM engine. When the actor's weights changed (an
update or a checkpoint load), the next rollout streams this rank's generation
weights out of :meth:`GenerationShards.hf_stream` (the transition, one
weight at a time, whole HF-named tensors) and reloads them into the engine in
place; the engine's own copy is then the only full set of generation weights
on the rank. Each generation replica decodes the rows
:meth:`GenerationShards.prompt_rows` gives it and
:meth:`GenerationShards.own_rows` hands every rank its own back.

With tg > 1 the engine runs vLLM tensor parallelism over the generation
tensor-parallel group (``distributed_executor_backend="external_launcher"``:
the engine joins the actor's torch.distributed world). vLLM forms its
tensor-parallel groups from consecutive ranks, so the generation groups must
be those (:func:`vllm_layout_problem`); vLLM's loaders take whole tensors
and cut their own slice, which is what ``hf_stream`` yields.

Only the rollout contract is used here: no training backend is imported.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hfsdk import ActorSource, Batch, HfsdkError, RolloutBackend
from hfsdk_backend_common import require_loaded
from hfsdk_backend_common.hybrid.shards import GenerationShards
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_rollout_vllm.checks import require_servable
from hfsdk_rollout_vllm.readback import verified_reload
from hfsdk_rollout_vllm.request_server import ServesRequests
from hfsdk_rollout_vllm.requests import (
    LOG_PROB_KEY,
    SEED_RANGE,
    engine_dtype,
    generate_rows,
)

if TYPE_CHECKING:
    from hfsdk_rollout_vllm.engine import ColocatedEngine
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig


def vllm_layout_problem(shards: GenerationShards) -> str | None:
    """Why vLLM cannot generate in the actor's generation layout (None: it can).

    The engine is fed one whole-model shard per rank (no generation pipeline
    stages). vLLM (external launcher) groups ranks ``[0..tg-1], [tg..2tg-1],
    ...`` into its tensor-parallel groups; the generation groups must be those.
    """
    if shards.pg != 1:
        return (
            f"rollout.backend=vllm with actor.rollout_layout.pp={shards.pg}: the vLLM engine is "
            "fed one whole-model generation shard per rank (set actor.rollout_layout.pp=1)"
        )
    ranks = tuple(shards.tp_ranks)
    start = ranks[0] - ranks[0] % shards.tg if ranks else 0
    if shards.tg == 1 or ranks == tuple(range(start, start + shards.tg)):
        return None
    return (
        f"rollout.backend=vllm with actor.rollout_layout.tp={shards.tg}: vLLM's tensor-parallel "
        f"groups are consecutive ranks, this layout's generation group is {list(ranks)} "
        "(use actor.rollout_layout.tp=1 or the training tp)"
    )


class HybridVLLMRollout(ServesRequests, HFRollout):
    """``generate_sequences`` by vLLM engines fed from the actor's generation shards.

    Collective over the actor's ranks (every rank calls it). Keeps the
    ``vllm`` rollout's contract: ``rollout_log_probs`` and per-request seeds
    drawn from torch's global generator (restored on resume). Single requests
    (``generate_request``) are served at tg = 1 only: each rank's engine then
    batches its own requests; a tensor-parallel engine would need its ranks to
    send identical requests in lockstep.
    """

    reports_log_probs = True

    config: VLLMRolloutConfig
    collective = True

    def __init__(
        self, config: VLLMRolloutConfig, actor: ActorSource, shards: GenerationShards
    ) -> None:
        RolloutBackend.__init__(self, config, actor)
        self._setup_tokens()
        self.shards = shards
        from hfsdk_rollout_vllm.engine import ColocatedEngine

        on_cpu = actor.device.type == "cpu"
        require_servable(actor.model_path, on_cpu)
        if shards.tg > 1:
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
            config,
            actor.model_path,
            engine_dtype(config, actor),
            on_cpu,
            tensor_parallel_size=shards.tg,
        )
        self.loaded_version = actor.weights_version
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

    def update_weights(self, actor: ActorSource) -> None:
        """The actor's weights changed: reload at the next rollout (a collective transition)."""
        if actor.weights_version != self.loaded_version:
            self.weights_stale = True

    def close(self) -> None:
        """Shut the vLLM engine down (in-process workers stop; see ``Worker.close``)."""
        self._close_requests()
        self.vllm.close()

    def _vllm_engine(self) -> ColocatedEngine:
        return self.vllm

    @property
    def serves_requests(self) -> bool:
        """At generation tp > 1 the ranks decode in lockstep: turns are batched instead."""
        return self.shards is None or self.shards.tg == 1

    def _ready_for_requests(self, *, collective: bool) -> None:
        shards = self.shards
        assert shards is not None
        if shards.tg > 1:
            raise HfsdkError(
                f"rollout.backend=vllm serves single requests (multi-turn) at generation tp = 1 "
                f"only, but the actor generates at tp = {shards.tg}; set "
                "actor.rollout_layout.tp=1 or use rollout.backend=hf"
            )
        if not self.weights_stale:
            return
        if not collective and dist.is_initialized() and dist.get_world_size() > 1:
            raise HfsdkError(
                "the vLLM engine's weights are stale and reloading them is collective; enter "
                "rollout.serving() on every rank of the actor before sending generate_request"
            )
        self.reload_metrics = self.reload_weights()

    def _require_current(self) -> None:
        if self.weights_stale:  # updated after the request server started: no reload ran yet
            raise HfsdkError(
                "the vLLM engine's weights are older than the actor's (it updated after requests "
                "started); enter rollout.serving() on every rank of the actor to reload them "
                "before sending generate_request"
            )
        super()._require_current()

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """This rank's responses and their log-probs, decoded by its generation replica."""
        started = time.perf_counter()
        shards = self.shards
        assert shards is not None
        if self.weights_stale:
            self.reload_metrics = self.reload_weights()
        require_loaded(self.loaded_version, self.actor.weights_version, "the vLLM engine")
        # Drawn for the whole batch on every rank, greedy or not: each rank's generator
        # advances alike whatever its share (exact resume).
        seeds = torch.randint(SEED_RANGE, (len(prompts),))
        if shards.tg > 1:
            # vLLM's tensor-parallel ranks must run identical requests.
            dist.broadcast(seeds, src=shards.tp_ranks[0], group=shards.tp_group)
        ids, mask, (row_seeds,) = shards.prompt_rows(
            prompts["input_ids"], prompts["attention_mask"], self.tokenizer.pad_token_id, [seeds]
        )
        responses, log_probs = generate_rows(
            self.vllm,
            self.config,
            self.eos_ids,
            self.tokenizer.pad_token_id,
            ids,
            mask,
            row_seeds.tolist(),
            greedy,
        )
        self.vllm.sleep()  # the actor trains next (CUDA: the KV cache is released)
        responses, log_probs = shards.own_rows([responses, log_probs])
        self.last_metrics = {
            **self.reload_metrics,
            "timing/generate_s": time.perf_counter() - started,
        }
        return responses, {LOG_PROB_KEY: log_probs}

    def reload_weights(self) -> dict[str, float]:
        """Load the actor's current weights into the engine now; the transition's metrics.

        Streams this rank's generation weights (collective over the actor's
        ranks); a failure on any rank raises on every rank.
        """
        shards = self.shards
        assert shards is not None
        started = time.perf_counter()
        stream = shards.hf_stream()
        verified: dict[str, float] = {}
        drop = None  # tg = 1: the vllm_drop fault as any engine takes it
        if shards.tg > 1:
            # vllm_drop at tg > 1: only the group's last rank loses a slice, so the others
            # verify theirs and must still fail (the verdict is agreed over the actor's ranks).
            from hfsdk import take_fault

            last = dist.get_rank() == shards.tp_ranks[-1]
            drop = last and take_fault("vllm_drop", self.actor.weights_version)
        # Each rank's engine is read back (see .readback): the whole model at tg = 1, this
        # rank's vLLM slices against the slices of the stream it loaded at tg > 1.
        verified = verified_reload(
            self.vllm,
            stream,
            dtype=self.vllm.dtype,
            version=self.actor.weights_version,
            group=self.actor.dp.actor_group,
            device=self.actor.device,
            verify=self.config.verify_weights,
            sliced=shards.tg > 1,
            drop=drop,
        )
        self.weights_stale = False
        self.loaded_version = self.actor.weights_version
        self.weight_updates += 1
        metrics: dict[str, Any] = {
            "perf/reshard_tp_gather_bytes": 0.0,
            **shards.metrics(),
            **verified,
        }
        metrics.setdefault("timing/reshard_s", time.perf_counter() - started)
        return {k: float(v) for k, v in metrics.items()}
