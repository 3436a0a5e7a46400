"""Sampling through the rollout contract: one persistent rollout, fed the sampled adapter's weights.

A sampling client's weights are an adapter of the :class:`~.adapters.AdapterPool`
(or the base model alone). :class:`AdapterSource` offers them to a rollout
backend the way a training backend's actor does: as HF-named *merged* weights
(``W + s·B·A``, :meth:`AdapterPool.merged_weights`) under a ``weights_version``
that changes whenever the sampled weights do. :class:`PoolSampler` builds the
rollout once (``hfsdk serve --rollout NAME``: any registered backend that
serves requests: ``hf``, the hfsdk KV-cache decoder; ``vllm``, a persistent
vLLM engine) and, before a call, tells it about new weights
(``update_weights``, as a worker does after every update) only when the sampled
adapter or its weights changed: a vLLM engine reloads then, and only then.

Each sample is one :class:`hfsdk.GenerationRequest` (temperature, top-p,
top-k, stop ids, a seed derived from the client's), all of a call in flight
together. Log-probs are the backend's (the contract's: at the request's
temperature, over the whole vocabulary); where a backend reports NaN (a vLLM
engine whose log-prob mode does not give the request's temperature) they are
taken by a teacher-forced forward of the pool's model. Prompt log-probs
(``compute_logprobs``, ``include_prompt_logprobs``) come the same way: the
first request of a call asks the backend for them (``prompt_logprobs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from hfsdk import (
    DataParallelInfo,
    GenerationRequest,
    GenerationResult,
    HfsdkError,
    RolloutBackend,
    build_rollout,
    get_registry,
    run_coroutine,
    unknown_name_message,
)
from hfsdk_serve.adapters import AdapterPool
from hfsdk_serve.wire import SequenceOut

SEED_RANGE = 2**31 - 1
MAX_SAMPLES = 1024
"""Samples one request may ask for: the model thread serves one request at a time, so a
request for millions would stall every other client."""
DEFAULT_CONTEXT = 2048
"""The context a rollout is built for when the model's config names none."""
GREEDY_BELOW = 1e-5
"""Temperatures under this sample greedily, as vLLM's do (its ``_SAMPLING_EPS``): dividing
logits by a tinier one overflows to inf and NaN log-probs, and both backends then agree."""


UNKNOWN_VERSION = -1
"""The source's ``weights_version`` after a failed reload: no adapter's (they count from 0)."""


class AdapterSource:
    """The rollout contract's ``ActorSource`` for the adapter being sampled (``None``: base)."""

    def __init__(self, pool: AdapterPool, *, untie_head: bool = False) -> None:
        self.pool = pool
        self.adapter: str | None = None
        self.tokenizer = pool.tokenizer
        # A tied base's head takes an adapter of its own (train_unembed): untied, the
        # rollout holds it apart from the input embeddings, as the trained policy does.
        self.untied_head = untie_head and pool.tied_head is not None
        self.hf_config = pool.untied_config() if self.untied_head else pool.hf_config
        self.model_path = pool.model_dir
        # The generation config's EOS ids (a request adds its stops; the rollout adds the
        # tokenizer's), as a training actor reads them, so served samples end where rollouts do.
        self.generation_eos_ids = generation_eos_ids(pool.model_dir, pool.hf_config)
        self.device = torch.device("cpu")
        self.compute_dtype = torch.float32
        self.dp = DataParallelInfo()
        self.weights_version = 0  # the base model's, which a new engine loads from model_path
        self.last_weights_metrics: dict[str, float] = {}
        self.weight_probes: dict[str, Any] = {}  # each merged weight's, set as it is yielded

    def select(self, adapter: str | None) -> bool:
        """Offer adapter ``adapter``'s current weights; whether they differ from the last ones."""
        version = self.pool.version(adapter)
        changed = (adapter, version) != (self.adapter, self.weights_version)
        self.adapter, self.weights_version = adapter, version
        return changed

    def forget(self) -> None:
        """A reload of the selected weights failed: what the rollout holds is unknown (maybe
        a part of them), so the next :meth:`select` offers its weights, whichever it names."""
        self.weights_version = UNKNOWN_VERSION

    def hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The merged weights of the selected adapter (HF names, float32, one at a time)."""
        self.weight_probes = {}
        yield from self.pool.merged_weights(
            self.adapter, probes=self.weight_probes, untied_head=self.untied_head
        )

    @contextlib.contextmanager
    def live_hf_module(self, *, gather: bool = False) -> Iterator[torch.nn.Module | None]:
        """None: the pool's module is a peft model, so generation gets the merged weights."""
        yield None

    def generation_shards(self, config: Any) -> None:
        """No resharding: the weights are whole in this process."""
        return None


def generation_eos_ids(model_dir: Any, hf_config: Any) -> list[int]:
    """EOS ids of ``model_dir``'s generation config (may be empty).

    Without a generation_config.json the config is derived from ``hf_config``, as
    transformers does for a loaded model (the fsdp actor's ``module.generation_config``).
    """
    from transformers import GenerationConfig

    try:
        generation = GenerationConfig.from_pretrained(str(model_dir))
    except OSError:
        generation = GenerationConfig.from_model_config(hf_config)
    configured = generation.eos_token_id
    if configured is None:
        return []
    return [int(configured)] if isinstance(configured, int) else [int(t) for t in configured]


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

    @property
    def sampling_temperature(self) -> float:
        """The temperature sampled at: 0 (greedy) for any under :data:`GREEDY_BELOW`."""
        return 0.0 if self.temperature < GREEDY_BELOW else self.temperature

    @property
    def scores_prompt_only(self) -> bool:
        """Whether this is the SDK's ``compute_logprobs``: prompt log-probs and the one token
        it must ask for (``max_tokens=1``), which the caller ignores."""
        return self.prompt_logprobs and self.max_tokens == 1

    def requests(self) -> list[GenerationRequest]:
        """One request per sample; sample ``i`` of a seeded call gets its own derived seed."""
        return [
            GenerationRequest(
                prompt_ids=self.prompt,
                max_new_tokens=self.max_tokens,
                temperature=self.sampling_temperature,
                top_p=self.top_p,
                top_k=max(self.top_k, 0),  # the SDK's -1 means no cut
                seed=None if self.seed is None else sample_seed(self.seed, i),
                stop_token_ids=self.stop_ids,
                prompt_logprobs=self.prompt_logprobs and i == 0,  # one sample scores the prompt
            )
            for i in range(self.num_samples)
        ]


def sample_seed(seed: int, index: int) -> int:
    """The seed of sample ``index`` of a call seeded ``seed`` (stable, independent per sample)."""
    state = np.random.SeedSequence([seed % 2**64, index]).generate_state(1, dtype=np.uint64)
    return int(state[0]) % SEED_RANGE


def check_spec(pool: AdapterPool, spec: SampleSpec) -> None:
    """Refuse a request the model cannot serve, with one line."""
    vocab = pool.vocab_size
    bad = [t for t in spec.prompt if not 0 <= t < vocab]
    if bad:
        raise HfsdkError(
            f"prompt token ids {bad[:3]} are outside the vocabulary [0, {vocab}); encode "
            "prompts with this model's tokenizer"
        )
    bad_stops = [t for t in spec.stop_ids if not 0 <= t < vocab]
    if bad_stops:
        raise HfsdkError(
            f"stop token ids {bad_stops[:3]} are outside the vocabulary [0, {vocab}); pass ids "
            "of this model's tokenizer, or stop strings"
        )
    if not spec.prompt:
        raise HfsdkError("the prompt is empty; send at least one token")
    if spec.max_tokens < 1:
        raise HfsdkError(f"max_tokens={spec.max_tokens}; expected at least 1")
    if not 1 <= spec.num_samples <= MAX_SAMPLES:
        raise HfsdkError(f"num_samples={spec.num_samples}; expected 1 to {MAX_SAMPLES}")
    if not math.isfinite(spec.temperature) or spec.temperature < 0 or not 0 < spec.top_p <= 1:
        raise HfsdkError(
            f"temperature={spec.temperature}, top_p={spec.top_p}: expected a finite "
            "temperature >= 0 and 0 < top_p <= 1"
        )
    limit = pool.max_length
    if limit and spec.scores_prompt_only:
        # The token compute_logprobs must ask for is never used: a prompt of the whole
        # context is scored without generating (PoolSampler.sample).
        if len(spec.prompt) > limit:
            raise HfsdkError(
                f"prompt ({len(spec.prompt)} tokens) exceeds the model's context of {limit} "
                "tokens; shorten the prompt"
            )
    elif limit and len(spec.prompt) + spec.max_tokens > limit:
        raise HfsdkError(
            f"prompt ({len(spec.prompt)} tokens) + max_tokens ({spec.max_tokens}) exceeds the "
            f"model's context of {limit} tokens; shorten the prompt or lower max_tokens"
        )


def token_logprobs(
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


def rollout_config(backend: str, context: int) -> Any:
    """The config of rollout backend ``backend`` for a model of ``context`` positions.

    Half the context for the prompt, half for the response: the engine's limit is
    their sum, and each request asks for its own ``max_new_tokens`` within it.
    Temperature 1 makes a vLLM engine report the contract's log-probs for
    temperature-1 and greedy requests (``raw_logprobs``).
    """
    registry = get_registry("rollout_backends")
    if backend not in registry:
        raise HfsdkError(unknown_name_message("rollout backend", backend, sorted(registry)))
    prompt = context // 2
    try:
        return registry[backend].make_config(
            backend=backend,
            max_prompt_length=prompt,
            max_response_length=context - prompt,
            temperature=1.0,
        )
    except TypeError as exc:
        raise HfsdkError(
            f"rollout backend {backend!r} has no max_prompt_length / max_response_length / "
            f"temperature settings ({exc}); hfsdk serve samples with the hf-family backends "
            "(hf, vllm)"
        ) from None


class PoolSampler:
    """One rollout of backend ``backend`` over ``pool``, built once, fed the sampled adapter."""

    def __init__(self, pool: AdapterPool, backend: str = "hf") -> None:
        self.pool = pool
        self.backend = backend
        self.source = AdapterSource(pool, untie_head=_builds_from_actor_config(backend))
        config = rollout_config(backend, pool.max_length or DEFAULT_CONTEXT)
        self.rollout = build_rollout(config, self.source)
        if not self.rollout.serves_requests:
            self.rollout.close()
            raise HfsdkError(
                f"rollout backend {backend!r} does not serve single requests for "
                f"{type(pool.hf_config).__name__} models (it would sample at its configured "
                "settings, not the client's); use --rollout hf with a Llama-style model"
            )
        self.reloads = 0
        """How often the rollout was told of new weights (a vLLM engine reloaded)."""

    def close(self) -> None:
        """Release the rollout (a vLLM engine shuts down)."""
        self.rollout.close()

    def select(self, adapter: str | None) -> None:
        """Make adapter ``adapter``'s current weights the rollout's (a no-op when they are)."""
        if self.pool.trains_tied_head(adapter) and not self.source.untied_head:
            raise HfsdkError(
                f"model {adapter!r} trains the LM head, which the base model ties to its input "
                f"embeddings, and the {self.backend!r} rollout cannot hold a head of its own; "
                "serve with --rollout hf, or create the training client with train_unembed=False"
            )
        if self.source.select(adapter):
            try:
                self.rollout.update_weights(self.source)
            except BaseException:
                self.source.forget()  # else every later select would skip the reload
                raise
            self.reloads += 1

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        async def together() -> list[GenerationResult]:
            return list(await asyncio.gather(*(self.rollout.generate_request(r) for r in requests)))

        with self.rollout.serving():
            return run_coroutine(together())

    def sample(
        self, adapter: str | None, spec: SampleSpec
    ) -> tuple[list[SequenceOut], list[float] | None]:
        """``spec.num_samples`` continuations of ``spec.prompt`` (and the prompt's log-probs)."""
        check_spec(self.pool, spec)
        if spec.scores_prompt_only and len(spec.prompt) >= (self.pool.max_length or math.inf):
            return self._score_full_context(adapter, spec)
        requests = spec.requests()
        self.select(adapter)
        results = self._generate(requests)
        sequences = []
        stale = [i for i, r in enumerate(results) if any(map(math.isnan, r.logprobs))]
        forced = token_logprobs(
            self.pool,
            adapter,
            [spec.prompt + list(results[i].token_ids) for i in stale],
            requests[0].logprob_temperature,
        )
        start = len(spec.prompt) - 1
        recomputed = {i: lp[start:].tolist() for i, lp in zip(stale, forced, strict=True)}
        for i, result in enumerate(results):
            sequences.append(
                SequenceOut(
                    tokens=list(result.token_ids),
                    logprobs=recomputed.get(i, list(result.logprobs)),
                    stopped=result.finish_reason == "stop",
                )
            )
        prompt_logprobs = None
        if spec.prompt_logprobs:
            scored = results[0].prompt_logprobs
            if scored is None or any(map(math.isnan, scored)):
                (lp,) = token_logprobs(self.pool, adapter, [spec.prompt], 1.0)
                scored = tuple(lp.tolist())
            prompt_logprobs = [math.nan, *scored]
        return sequences, prompt_logprobs

    def _score_full_context(
        self, adapter: str | None, spec: SampleSpec
    ) -> tuple[list[SequenceOut], list[float]]:
        """A prompt that fills the context, scored by a forward: no room is left for the
        token the SDK asks for (a vLLM engine refuses it), so each sample is empty."""
        (lp,) = token_logprobs(self.pool, adapter, [spec.prompt], 1.0)
        empty = SequenceOut(tokens=[], logprobs=[], stopped=False)
        return [empty] * spec.num_samples, [math.nan, *lp.tolist()]


def _builds_from_actor_config(backend: str) -> bool:
    """Whether rollout ``backend`` builds its model from the source's ``hf_config`` (so it can
    untie a tied LM head: :attr:`hfsdk.RolloutBackend.builds_from_actor_config`); vLLM loads
    the model directory's own config."""
    impl = get_registry("rollout_backends")[backend].impl
    is_rollout = isinstance(impl, type) and issubclass(impl, RolloutBackend)
    return is_rollout and impl.builds_from_actor_config
