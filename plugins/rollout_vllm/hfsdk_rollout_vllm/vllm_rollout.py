"""The ``vllm`` rollout backend: generation by a vLLM engine colocated with the actor.

It keeps the ``hf`` rollout's batch contract (inputs, output keys, response
mask, ``n`` / greedy / sampling settings; see :class:`HFRollout`) and changes
who decodes: a vLLM engine built once in the actor's process from the actor's
model directory. Written against the rollout contract only
(:mod:`hfsdk.core.rollout_contract`): when the actor offers generation shards
in a layout vLLM can take (:func:`~.hybrid_vllm.vllm_layout_problem`) the
engine is fed from them (:class:`~.hybrid_vllm.HybridVLLMRollout`);
otherwise every rank reloads its own engine from ``actor.hf_weights()``
after every update (in memory, one tensor at a time) and the collecting
ranks generate. On CUDA the engine's KV cache is released while the actor
trains. Each response also gets ``rollout_log_probs``: the log-probability
of each sampled token as the actor computes it (temperature-scaled, over the
whole vocabulary, see ``VLLMRolloutConfig.logprobs_mode``; 0 where masked).

A reload that fails on one rank fails on every rank at once, with one
message (:func:`~hfsdk_backend_common.rollout.agreement.on_every_rank`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

from hfsdk import ActorSource, Batch, RolloutBackend, take_fault
from hfsdk_backend_common import require_loaded
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_rollout_vllm.checks import require_servable
from hfsdk_rollout_vllm.readback import verified_reload
from hfsdk_rollout_vllm.request_server import ServesRequests
from hfsdk_rollout_vllm.requests import (
    LOG_PROB_KEY,
    SEED_RANGE,
    engine_dtype,
    generate_rows,
    sampling_params,
)

if TYPE_CHECKING:
    from hfsdk_rollout_vllm.engine import ColocatedEngine
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

logger = logging.getLogger(__name__)

NO_VERSION = -1
"""``loaded_version`` after a reload that failed partway: no actor weights version equals it
(versions count up from 0)."""


class VLLMRollout(ServesRequests, HFRollout):
    """Generates with a vLLM engine in this process, reloaded with the actor's weights.

    ``actor`` supplies the model directory (architecture and first weights),
    the tokenizer, the device and the compute dtype. Sampled requests get
    per-request seeds drawn from torch's global generator, so a run that
    checkpoints and restores that generator resumes with exactly the samples
    it would have drawn. Only the collecting ranks call :meth:`generate_sequences`.
    Single requests (``generate_request``) go to the same engine's continuous
    batching (:mod:`.request_server`).
    """

    reports_log_probs = True

    config: VLLMRolloutConfig
    collective = False

    def __init__(self, config: VLLMRolloutConfig, actor: ActorSource) -> None:
        RolloutBackend.__init__(self, config, actor)
        self._setup_tokens()
        self.shards = None
        from hfsdk_rollout_vllm.engine import ColocatedEngine

        on_cpu = actor.device.type == "cpu"
        require_servable(actor.model_path, on_cpu)
        self.engine: ColocatedEngine = ColocatedEngine(
            config, actor.model_path, engine_dtype(config, actor), on_cpu
        )
        self.weight_updates = 0
        self.loaded_version = actor.weights_version

    @classmethod
    def build(cls, config: VLLMRolloutConfig, actor: ActorSource) -> RolloutBackend:
        """The shard-fed engine when the actor's generation shards suit vLLM, else this one."""
        from hfsdk_rollout_vllm.hybrid_vllm import HybridVLLMRollout, vllm_layout_problem

        shards = actor.generation_shards(config)
        if shards is not None:
            problem = vllm_layout_problem(shards)
            if problem is None:
                return HybridVLLMRollout(config, actor, shards)
            logger.warning("%s; every rank reloads its engine from the actor's weights", problem)
        return cls(config, actor)

    def update_weights(self, actor: ActorSource) -> None:
        """Load the actor's new weights into the engine, in place (no files, no second model).

        Collective over the actor's ranks (``actor.hf_weights()``); a failure
        on any rank raises on every rank. The engine is then read back and compared with
        what was streamed (:func:`~.readback.verified_reload`): a tensor that did not
        arrive, or a merged LoRA weight that is not the merge of its factors (the actor's
        ``weight_probes``), raises :class:`hfsdk_backend_common.WeightSyncMismatch` on every rank;
        otherwise the next rollout reports ``sync/verified``. ``vllm_skip:N`` (fault
        injection) skips the reload of version N: the next generation is refused. A reload
        that raises leaves ``loaded_version`` at :data:`NO_VERSION` (the engine may hold
        part of the new weights), so the next call reloads whatever the version.
        """
        if actor.weights_version == self.loaded_version:
            return
        if take_fault("vllm_skip", actor.weights_version):
            return  # a reload that never ran: generating is refused (require_loaded)
        # The contract keeps a yielded tensor valid only until the iterator advances (an
        # FSDP unit is resharded then); vLLM's loader may still hold it, so it gets a copy.
        weights = ((name, tensor.clone()) for name, tensor in actor.hf_weights())
        try:
            self.last_metrics = verified_reload(
                self.engine,
                weights,
                dtype=self.engine.dtype,
                version=actor.weights_version,
                group=actor.dp.actor_group,
                device=actor.device,
                verify=self.config.verify_weights,
                probes=lambda: actor.weight_probes,
            )
        except BaseException:
            # The engine may hold part of the new weights: it holds no version now, so a
            # later request for the old one reloads (not skipped) and generating is refused.
            self.loaded_version = NO_VERSION
            raise
        self.loaded_version = actor.weights_version
        self.weight_updates += 1

    def sampling_params(self, greedy: bool, seed: int | None = None) -> Any:
        """vLLM's ``SamplingParams`` for one request (the model's defaults never apply)."""
        return sampling_params(self.config, self.eos_ids, greedy, seed)

    def close(self) -> None:
        """Shut the vLLM engine down (in-process workers stop; see ``Worker.close``)."""
        self._close_requests()
        self.engine.close()

    def _vllm_engine(self) -> ColocatedEngine:
        return self.engine

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        require_loaded(self.loaded_version, self.actor.weights_version, "the vLLM engine")
        # Drawn even for greedy calls, so the generator advances the same way whatever
        # the call's kind; per-request seeds make samples independent of batching.
        seeds = torch.randint(SEED_RANGE, (len(prompts),)).tolist()
        responses, log_probs = generate_rows(
            self.engine,
            self.config,
            self.eos_ids,
            self.tokenizer.pad_token_id,
            prompts["input_ids"],
            prompts["attention_mask"],
            seeds,
            greedy,
        )
        # The actor trains next: on CUDA the KV cache is released until the next call.
        self.engine.sleep()
        return responses, {LOG_PROB_KEY: log_probs}
