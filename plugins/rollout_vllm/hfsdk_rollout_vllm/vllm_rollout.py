"""The ``vllm`` rollout backend: generation by a vLLM engine colocated with the actor.

It keeps the ``hf`` rollout's contract (inputs, output keys, response mask,
``n`` / greedy / sampling settings; see :class:`HFRollout`) and changes who
decodes: a vLLM engine built once in the actor's process. After every actor
update the worker passes the new weights through :meth:`update_weights` as
(HF name, tensor) pairs, in memory; on CUDA the engine's KV cache is released
while the actor trains. Each response also gets ``rollout_log_probs``: the
log-probability of each sampled token as the actor computes it (temperature-scaled,
over the whole vocabulary, see ``VLLMRolloutConfig.logprobs_mode``; 0 where masked).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

from hfsdk import Batch
from hfsdk_backend_fsdp.hf_rollout import HFRollout
from hfsdk_rollout_vllm.checks import require_servable

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_rollout_vllm.engine import ColocatedEngine
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

LOG_PROB_KEY = "rollout_log_probs"
SEED_RANGE = 2**31 - 1


class VLLMRollout(HFRollout):
    """Generates with a vLLM engine in this process, reloaded with the actor's weights.

    ``actor`` supplies the model directory (architecture and first weights),
    the tokenizer, the device and the compute dtype. Sampled requests get
    per-request seeds drawn from torch's global generator, so a run that
    checkpoints and restores that generator (the fsdp worker does) resumes
    with exactly the samples it would have drawn.
    """

    config: VLLMRolloutConfig

    def __init__(
        self,
        config: VLLMRolloutConfig,
        actor: ActorEngine,
        tokenizer: PreTrainedTokenizerBase | None = None,
    ) -> None:
        super().__init__(config, actor, tokenizer)
        from hfsdk_rollout_vllm.engine import ColocatedEngine

        on_cpu = actor.device.type == "cpu"
        require_servable(actor.model_path, on_cpu)
        dtype = actor.compute_dtype if config.dtype == "auto" else getattr(torch, config.dtype)
        self.engine: ColocatedEngine = ColocatedEngine(config, actor.model_path, dtype, on_cpu)
        self.weight_updates = 0

    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]] | None = None) -> None:
        """Load the actor's new weights into the engine, in place (no files, no second model).

        ``weights``: (HF parameter name, full tensor) pairs in the model's layer
        order, e.g. :meth:`ActorEngine.hf_weights`; any producer (a megatron
        actor converting its shards to HF names) may feed it. ``None``: nothing
        changed.
        """
        if weights is None:
            return
        self.engine.reload_weights(weights)
        self.weight_updates += 1

    @classmethod
    def from_hybrid_engine(cls, config: VLLMRolloutConfig, engine: Any) -> Any:
        """The same backend for an actor that feeds it through the 3D-HybridEngine (megatron).

        ``engine`` is the megatron actor engine; the rollout reshards its
        training shard into the generation layout and reloads the weights
        from there (see :class:`~hfsdk_rollout_vllm.hybrid_vllm.HybridVLLMRollout`).
        """
        from hfsdk_rollout_vllm.hybrid_vllm import HybridVLLMRollout

        return HybridVLLMRollout(config, engine)

    def sampling_params(self, greedy: bool, seed: int | None = None) -> Any:
        """vLLM's ``SamplingParams`` for one request (the model's defaults never apply)."""
        return sampling_params(self.config, self.eos_ids, greedy, seed)

    def close(self) -> None:
        """Shut the vLLM engine down (in-process workers stop; see ``Worker.close``)."""
        self.engine.close()

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
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


def sampling_params(
    config: VLLMRolloutConfig, eos_ids: list[int], greedy: bool, seed: int | None = None
) -> Any:
    """vLLM's ``SamplingParams`` for one request of a rollout configured by ``config``."""
    from vllm import SamplingParams

    common: dict[str, Any] = {
        "max_tokens": config.max_response_length,
        "stop_token_ids": eos_ids,
        "logprobs": 0,  # the sampled token's own log-prob
        "detokenize": False,
    }
    if greedy:
        return SamplingParams(temperature=0.0, **common)
    return SamplingParams(
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k if config.top_k > 0 else 0,
        seed=seed,
        **common,
    )


def generate_rows(
    engine: ColocatedEngine,
    config: VLLMRolloutConfig,
    eos_ids: list[int],
    pad_id: int,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    seeds: list[int],
    greedy: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded responses (B, R) and their tokens' log-probs for left-padded prompts.

    ``seeds[i]`` is row i's sampling seed (ignored when ``greedy``); rows go to
    the engine ``config.micro_batch_size`` at a time (all at once when 0).
    """
    width = config.max_response_length
    rows = len(input_ids)
    responses = torch.full((rows, width), pad_id, dtype=torch.long)
    log_probs = torch.zeros((rows, width), dtype=torch.float32)
    step = config.micro_batch_size or max(rows, 1)
    for start in range(0, rows, step):
        stop = min(start + step, rows)
        requests = [
            {"prompt_token_ids": row[m.bool()].tolist()}
            for row, m in zip(input_ids[start:stop], attention_mask[start:stop], strict=True)
        ]
        params = [sampling_params(config, eos_ids, greedy, seeds[i]) for i in range(start, stop)]
        for offset, output in enumerate(engine.generate(requests, params)):
            completion = output.outputs[0]
            tokens = list(completion.token_ids)[:width]
            row = start + offset
            responses[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            for t, (token, entry) in enumerate(
                zip(tokens, completion.logprobs or [], strict=False)
            ):
                log_probs[row, t] = float(entry[token].logprob)
    return responses, log_probs
