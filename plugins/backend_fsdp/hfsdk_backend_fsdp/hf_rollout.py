"""The ``hf`` rollout backend: transformers ``generate`` on the actor engine's own module.

Prompts come in left-padded; responses go out right-padded to exactly
``max_response_length`` (so every rank's output has the same shape and
results concatenate). The response mask is 1 up to and including the first
EOS; tokens after it are the pad id.

Under FSDP2 (``weight_sync: stream``, the default) the actor's weights are
streamed one FSDP unit at a time into a generation module that is allocated
for the call and freed after it: the transition holds about one transformer
block beyond the generation weights, rollouts always use the current training
weights, and between calls only the training shard is kept. Each call reports
``timing/reshard_s``, ``perf/reshard_bytes`` (bytes received per rank) and
``perf/reshard_peak_extra_bytes`` in the output's ``meta['rollout_metrics']``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from hfsdk import Batch, HfsdkError
from hfsdk_backend_common.engine_support import require_keys
from hfsdk_backend_common.generation import eos_token_ids, response_mask_from_eos
from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_common.hybrid.llama_format import hf_llama_shape, hf_llama_to_megatron
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_common.token_ops import position_ids_from_mask
from hfsdk_backend_fsdp import sharding
from hfsdk_backend_fsdp.tp_slices import decoder_problems

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedTokenizerBase

    from hfsdk_backend_fsdp.actor import ActorEngine

PROMPT_KEYS = ("input_ids", "attention_mask")


def _parameter_bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


class HFRollout:
    """Generates ``n`` responses per prompt with the actor's current weights.

    ``generate_sequences(prompts, n=None, greedy=None)``: ``n`` and ``greedy``
    default to ``prompts.meta['n']`` / ``prompts.meta['greedy']``, then to the
    config (``n``; greedy when ``temperature`` is 0). Greedy decoding is what
    ReMax baselines and validation use.
    """

    def __init__(
        self,
        config: HFRolloutConfig,
        actor: ActorEngine,
        tokenizer: PreTrainedTokenizerBase | None = None,
    ) -> None:
        self.config = config
        self.actor = actor
        self.tokenizer = tokenizer or actor.tokenizer
        self.eos_ids = self._eos_ids()
        if self.tokenizer.pad_token_id is None:
            raise HfsdkError(
                "the tokenizer has no pad token; set one (e.g. tokenizer.pad_token = "
                "tokenizer.eos_token) and save it with the model"
            )
        model = actor.module.config
        self.uses_hfsdk_decoder = self._resolve_decoder(config.decoder, model.to_dict())
        self.decoder_shape = DecoderShape.from_hf_config(model) if self.uses_hfsdk_decoder else None

    @staticmethod
    def _resolve_decoder(choice: str, model: dict[str, Any]) -> bool:
        """Whether ``rollout.decoder`` (auto/hfsdk/transformers) means the hfsdk decoder."""
        if choice == "transformers":
            return False
        problems = decoder_problems(model)
        if choice == "hfsdk" and problems:
            raise HfsdkError(problems[0])
        return not problems

    def _eos_ids(self) -> list[int]:
        return eos_token_ids(self.actor.module.generation_config.eos_token_id, self.tokenizer)

    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]] | None = None) -> None:
        """Nothing to do: every call takes the actor's current weights (streamed or gathered).

        ``weights`` (HF name, tensor) pairs are the rollout contract's argument
        (see docs/backends.md); they are not consumed here, so a lazy iterator
        over sharded weights gathers nothing.
        """

    @contextlib.contextmanager
    def weights(self) -> Iterator[torch.nn.Module]:
        """A module with the actor's current full weights for one ``generate`` call.

        Sets :attr:`last_metrics` (the transition's cost on this rank).
        """
        actor = self.actor
        started = time.perf_counter()
        sharded = sharding.is_sharded(actor.module)
        # An unsharded actor that computes in bfloat16 keeps float32 weights (autocast);
        # generation gets a copy in the compute dtype, like the streamed one.
        cast = not sharded and actor.config.dtype != "float32"
        if (self.config.weight_sync == "gather" and sharded) or (not sharded and not cast):
            with actor.generation_module() as module:
                full = _parameter_bytes(module)
                self.last_metrics = {
                    "timing/reshard_s": time.perf_counter() - started,
                    "perf/reshard_bytes": full * (actor.dp.size - 1) / actor.dp.size,
                    "perf/reshard_peak_extra_bytes": float(full if sharded else 0),
                }
                yield module
            return
        module = self._generation_engine()
        stats = sharding.StreamStats()
        try:
            with torch.no_grad():
                module.to_empty(device=actor.device)
                targets = dict(module.named_parameters())
                source = (
                    sharding.stream_full_parameters(actor.module, actor.dp, stats)
                    if sharded
                    else actor.module.named_parameters()
                )
                for name, tensor in source:
                    targets[name].copy_(tensor)
                # Buffers (rotary frequencies) are not sharded; to_empty left them blank.
                for name, buffer in actor.module.named_buffers():
                    module.get_buffer(name).copy_(buffer)
            self.last_stream = stats
            self.last_metrics = {
                "timing/reshard_s": time.perf_counter() - started,
                "perf/reshard_bytes": float(stats.received_bytes),
                "perf/reshard_peak_extra_bytes": float(
                    stats.peak_unit_bytes
                    if sharded
                    else _parameter_bytes(module)
                ),
            }
            with torch.no_grad():
                yield module
        finally:
            # Drop the generation weights: between calls only the training shard is held.
            module.to_empty(device="meta")

    def _agreed_metrics(self) -> dict[str, float]:
        """The last transition's metrics, maxed over data-parallel ranks.

        Every rank then carries the same values, so the per-rank outputs
        concatenate (meta must agree) and the logged numbers are the worst rank's.
        """
        metrics = dict(getattr(self, "last_metrics", {}))
        dp = self.actor.dp
        if not metrics or not dp.distributed:
            return metrics
        import torch.distributed as dist

        keys = sorted(metrics)
        values = torch.tensor([metrics[k] for k in keys], dtype=torch.float64)
        dist.all_reduce(values, op=dist.ReduceOp.MAX, group=dp.group)
        return dict(zip(keys, values.tolist(), strict=True))

    def _generation_engine(self) -> torch.nn.Module:
        """The generation module: the actor's architecture, built once on the meta device."""
        engine = getattr(self, "_engine", None)
        if engine is None:
            actor = self.actor
            dtype = actor.compute_dtype if actor.config.dtype != "float32" else torch.float32
            with torch.device("meta"):
                engine = actor.model_class(actor.module.config).to(dtype)
            engine.generation_config = actor.module.generation_config
            engine.eval()
            self._engine = engine
        return engine

    def generation_config(self, greedy: bool) -> GenerationConfig:
        """The sampling settings of one call (the model directory's defaults are ignored)."""
        from transformers import GenerationConfig

        common: dict[str, Any] = {
            "max_new_tokens": self.config.max_response_length,
            "eos_token_id": self.eos_ids,
            "pad_token_id": self.tokenizer.pad_token_id,
            "use_cache": True,
        }
        if greedy:
            return GenerationConfig(do_sample=False, **common)
        return GenerationConfig(
            do_sample=True,
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            top_k=self.config.top_k,
            **common,
        )

    def generate_sequences(
        self, prompts: Batch, *, n: int | None = None, greedy: bool | None = None
    ) -> Batch:
        """Responses for ``prompts`` (see the batch contract for the output keys).

        Every output row is one response; the prompt's columns (``raw_prompt``,
        ``uid``, dataset columns) are repeated so the ``n`` responses of a prompt
        are consecutive. ``meta['temperature']`` records the sampling
        temperature (1 for greedy) for the log-prob computation.
        """
        require_keys(prompts, PROMPT_KEYS, "generate_sequences")
        n = int(n if n is not None else prompts.meta.get("n", self.config.n))
        greedy = bool(
            greedy
            if greedy is not None
            else prompts.meta.get("greedy", self.config.temperature == 0)
        )
        if n < 1:
            raise HfsdkError(f"n={n}; expected at least one response per prompt")
        prompt_length = prompts["input_ids"].shape[1]
        if prompt_length > self.config.max_prompt_length:
            raise HfsdkError(
                f"prompts are {prompt_length} tokens wide but rollout.max_prompt_length is "
                f"{self.config.max_prompt_length}; drop or truncate longer prompts in the data "
                "loader, or raise the limit"
            )
        repeated = prompts.select(
            tensor_keys=list(PROMPT_KEYS), non_tensor_keys=list(prompts.non_tensor_keys)
        ).repeat(n, interleave=True)
        responses, extra = self._generate(repeated, greedy)
        return self._assemble(repeated, responses, greedy, extra)

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Right-padded responses (B, R) plus extra per-token columns (none for HF)."""
        config = self.generation_config(greedy)
        width = self.config.max_response_length
        pad = self.tokenizer.pad_token_id
        step = (self.config.micro_batch_size or len(prompts)) if len(prompts) else 1
        device = self.actor.device
        parts = []
        with self.weights() as module:
            if self.uses_hfsdk_decoder:
                weights = hf_llama_to_megatron(
                    {name: p.detach() for name, p in module.named_parameters()},
                    hf_llama_shape(module.config),
                )
                decoder = TPDecoder(weights, self.decoder_shape, tg=1, tp_rank=0)
                ids, mask = prompts["input_ids"], prompts["attention_mask"]
                return self._decode(decoder, ids, mask, greedy), {}
            for part in prompts.split(step):
                input_ids = part["input_ids"].to(device)
                out = module.generate(
                    input_ids=input_ids,
                    attention_mask=part["attention_mask"].to(device),
                    generation_config=config,
                )
                generated = out[:, input_ids.shape[1] :].cpu()
                padded = torch.full((len(part), width), pad, dtype=generated.dtype)
                padded[:, : generated.shape[1]] = generated[:, :width]
                parts.append(padded)
        return (torch.cat(parts) if parts else torch.empty((0, width), dtype=torch.long)), {}

    def _decode(
        self, decoder: TPDecoder, ids: torch.Tensor, mask: torch.Tensor, greedy: bool
    ) -> torch.Tensor:
        """Responses (B, max_response_length) of the hfsdk decoder, in micro-batches."""
        width = self.config.max_response_length
        step = self.config.micro_batch_size or max(len(ids), 1)
        device = self.actor.device
        parts = [torch.empty((0, width), dtype=torch.long)]
        for start in range(0, len(ids), step):
            out = decoder.generate(
                ids[start : start + step].to(device),
                mask[start : start + step].to(device),
                max_new_tokens=width,
                eos_ids=self.eos_ids,
                pad_id=self.tokenizer.pad_token_id,
                greedy=greedy,
                sampling={
                    "temperature": self.config.temperature,
                    "top_k": self.config.top_k,
                    "top_p": self.config.top_p,
                },
            )
            parts.append(out.cpu())
        return torch.cat(parts)

    def _assemble(
        self,
        prompts: Batch,
        responses: torch.Tensor,
        greedy: bool,
        extra: dict[str, torch.Tensor] | None = None,
    ) -> Batch:
        """The output batch; ``extra`` per-token (B, R) columns are zeroed where masked."""
        pad = self.tokenizer.pad_token_id
        response_mask = response_mask_from_eos(responses, self.eos_ids)
        # Whatever follows the first EOS is padding.
        responses = torch.where(response_mask.bool(), responses, torch.full_like(responses, pad))
        prompt_ids = prompts["input_ids"]
        attention_mask = torch.cat([prompts["attention_mask"].long(), response_mask.long()], dim=1)
        texts = self.tokenizer.batch_decode(
            [row[mask.bool()].tolist() for row, mask in zip(responses, response_mask, strict=True)],
            skip_special_tokens=True,
        )
        non_tensors = {k: prompts[k] for k in prompts.non_tensor_keys}
        non_tensors["response_text"] = texts
        temperature = 1.0 if greedy else self.config.temperature
        masked_extra = {k: v * response_mask.to(v.dtype) for k, v in (extra or {}).items()}
        return Batch.from_dict(
            tensors={
                **masked_extra,
                "prompts": prompt_ids,
                "responses": responses,
                "input_ids": torch.cat([prompt_ids, responses], dim=1),
                "attention_mask": attention_mask,
                "position_ids": position_ids_from_mask(attention_mask),
                "response_mask": response_mask,
            },
            non_tensors=non_tensors,
            meta={
                **prompts.meta,
                "temperature": temperature,
                "greedy": greedy,
                "rollout_metrics": self._agreed_metrics(),
            },
        )
