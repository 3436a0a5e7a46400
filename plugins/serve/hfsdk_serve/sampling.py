"""Sampling through the rollout contract: one adapter of the pool as an ``ActorSource``.

A sampling client's weights are an adapter of the :class:`~.adapters.AdapterPool`
(or the base model alone). :class:`AdapterSource` offers that adapter to a rollout
backend the way a training backend's actor does: as its live HF module (zero
copy: the peft-injected base model with that adapter active). The ``hf`` rollout
backend (``decoder: transformers``, whose ``generate`` runs the injected LoRA
layers) generates the responses; the sampled tokens' log-probabilities are then
taken by a teacher-forced forward at the request's temperature, as
:class:`hfsdk.GenerationResult` defines them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import torch

from hfsdk import Batch, DataParallelInfo, HfsdkError, build_rollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_serve.adapters import AdapterPool
from hfsdk_serve.wire import SequenceOut


class AdapterSource:
    """The rollout contract's ``ActorSource`` for adapter ``adapter`` (``None``: the base model)."""

    def __init__(
        self, pool: AdapterPool, adapter: str | None, stop_ids: Sequence[int] = ()
    ) -> None:
        self.pool = pool
        self.adapter = adapter
        self.tokenizer = pool.tokenizer
        self.hf_config = pool.hf_config
        self.model_path = pool.model_dir
        self.generation_eos_ids = list(stop_ids)
        self.device = torch.device("cpu")
        self.compute_dtype = torch.float32
        self.dp = DataParallelInfo()
        self.weights_version = 0
        self.last_weights_metrics: dict[str, float] = {}

    def hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Not offered: :meth:`live_hf_module` always serves (one process, float32)."""
        raise HfsdkError(
            "hfsdk serve's sampler offers its live module only; use a rollout backend that "
            "generates on ActorSource.live_hf_module (the hf backend)"
        )

    @contextlib.contextmanager
    def live_hf_module(self, *, gather: bool = False) -> Iterator[torch.nn.Module]:
        """The base HF model with this adapter's LoRA layers active, in eval mode, no grad."""
        with self.pool.active(self.adapter), torch.no_grad():
            yield self.pool.peft.get_base_model()

    def generation_shards(self, config: Any) -> None:
        """No resharding: the module is whole in this process."""
        return None


@attrs.frozen(kw_only=True)
class SampleSpec:
    """What one ``/asample`` asks for."""

    prompt: list[int]
    num_samples: int
    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    seed: int | None
    stop_ids: tuple[int, ...]
    prompt_logprobs: bool


def _token_logprobs(
    pool: AdapterPool, adapter: str | None, rows: list[list[int]], temperature: float
) -> list[torch.Tensor]:
    """Per row, ``log p(row[i] | row[:i])`` for ``i >= 1`` at ``temperature`` (teacher-forced)."""
    out = []
    with pool.active(adapter), torch.no_grad():
        for row in rows:
            ids = torch.tensor([row], dtype=torch.long)
            logits = pool.peft(input_ids=ids, use_cache=False).logits[0, :-1].float()
            logp = torch.log_softmax(logits / temperature, dim=-1)
            out.append(logp.gather(1, ids[0, 1:, None])[:, 0])
    return out


def sample(
    pool: AdapterPool, adapter: str | None, spec: SampleSpec
) -> tuple[list[SequenceOut], list[float] | None]:
    """``spec.num_samples`` continuations of ``spec.prompt`` (and the prompt's log-probs)."""
    vocab = pool.vocab_size
    bad = [t for t in spec.prompt if not 0 <= t < vocab]
    if bad:
        raise HfsdkError(
            f"prompt token ids {bad[:3]} are outside the vocabulary [0, {vocab}); encode "
            "prompts with this model's tokenizer"
        )
    if not spec.prompt:
        raise HfsdkError("the prompt is empty; send at least one token")
    if spec.max_tokens < 1:
        raise HfsdkError(f"max_tokens={spec.max_tokens}; expected at least 1")
    if spec.num_samples < 1:
        raise HfsdkError(f"num_samples={spec.num_samples}; expected at least 1")
    limit = pool.max_length
    if limit and len(spec.prompt) + spec.max_tokens > limit:
        raise HfsdkError(
            f"prompt ({len(spec.prompt)} tokens) + max_tokens ({spec.max_tokens}) exceeds the "
            f"model's context of {limit} tokens; shorten the prompt or lower max_tokens"
        )
    greedy = spec.temperature == 0.0
    config = HFRolloutConfig(
        backend="hf",
        decoder="transformers",
        max_prompt_length=len(spec.prompt),
        max_response_length=spec.max_tokens,
        temperature=spec.temperature if not greedy else 1.0,
        top_p=spec.top_p,
        top_k=max(spec.top_k, 0),
    )
    source = AdapterSource(pool, adapter, spec.stop_ids)
    rollout = build_rollout(config, source)
    ids = torch.tensor([spec.prompt], dtype=torch.long)
    prompts = Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        meta={"n": spec.num_samples, "greedy": greedy},
    )
    with torch.random.fork_rng(devices=[]):
        if spec.seed is not None:
            torch.manual_seed(spec.seed)
        out = rollout.generate_sequences(prompts)
    rollout.close()
    stops = set(rollout.eos_ids)
    rows, tokens = [], []
    for response, mask in zip(out["responses"], out["response_mask"], strict=True):
        row = response[mask.bool()].tolist()
        tokens.append(row)
        rows.append(spec.prompt + row)
    temperature = 1.0 if greedy else spec.temperature
    logprobs = _token_logprobs(pool, adapter, rows, temperature)
    sequences = [
        SequenceOut(
            tokens=row,
            logprobs=lp[len(spec.prompt) - 1 :].tolist(),
            stopped=bool(row) and row[-1] in stops,
        )
        for row, lp in zip(tokens, logprobs, strict=True)
    ]
    prompt_logprobs = None
    if spec.prompt_logprobs:
        (lp,) = _token_logprobs(pool, adapter, [spec.prompt], 1.0)
        prompt_logprobs = [math.nan, *lp.tolist()]
    return sequences, prompt_logprobs
