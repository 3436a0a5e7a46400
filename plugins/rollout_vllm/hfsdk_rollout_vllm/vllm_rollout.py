"""The ``vllm`` rollout backend: generation by a vLLM engine colocated with the actor.

It keeps the ``hf`` rollout's contract (inputs, output keys, response mask,
``n`` / greedy / sampling settings; see :class:`HFRollout`) and changes who
decodes: a vLLM engine built once in the actor's process. After every actor
update the worker passes the new weights through :meth:`update_weights` as
(HF name, tensor) pairs, in memory; on CUDA the engine's KV cache is released
while the actor trains. Each response also gets ``rollout_log_probs``: the
log-probability vLLM gave each sampled token (under the temperature-scaled,
top-k/top-p-filtered distribution it sampled from; 0 where masked).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

from hfsdk.core.batch import Batch
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

    def sampling_params(self, greedy: bool, seed: int | None = None) -> Any:
        """vLLM's ``SamplingParams`` for one request (the model's defaults never apply)."""
        from vllm import SamplingParams

        common: dict[str, Any] = {
            "max_tokens": self.config.max_response_length,
            "stop_token_ids": self.eos_ids,
            "logprobs": 0,  # the sampled token's own log-prob
            "detokenize": False,
        }
        if greedy:
            return SamplingParams(temperature=0.0, **common)
        return SamplingParams(
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            top_k=self.config.top_k if self.config.top_k > 0 else 0,
            seed=seed,
            **common,
        )

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        width = self.config.max_response_length
        responses = torch.full((len(prompts), width), self.tokenizer.pad_token_id, dtype=torch.long)
        log_probs = torch.zeros((len(prompts), width), dtype=torch.float32)
        # Drawn even for greedy calls, so the generator advances the same way whatever
        # the call's kind; per-request seeds make samples independent of batching.
        seeds = torch.randint(SEED_RANGE, (len(prompts),)).tolist()
        step = self.config.micro_batch_size or max(len(prompts), 1)
        for start in range(0, len(prompts), step):
            stop = min(start + step, len(prompts))
            ids, mask = prompts["input_ids"][start:stop], prompts["attention_mask"][start:stop]
            requests = [
                {"prompt_token_ids": row[m.bool()].tolist()}
                for row, m in zip(ids, mask, strict=True)
            ]
            params = [self.sampling_params(greedy, seeds[i]) for i in range(start, stop)]
            for offset, output in enumerate(self.engine.generate(requests, params)):
                completion = output.outputs[0]
                tokens = list(completion.token_ids)[:width]
                row = start + offset
                responses[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
                for t, (token, entry) in enumerate(
                    zip(tokens, completion.logprobs or [], strict=False)
                ):
                    log_probs[row, t] = float(entry[token].logprob)
        # The actor trains next: on CUDA the KV cache is released until the next call.
        self.engine.sleep()
        return responses, {LOG_PROB_KEY: log_probs}
