"""The rollout contract: what a rollout backend implements and what it may ask of the actor.

Two sides meet here, and neither imports the other:

- every **training backend** (the shipped ones and a third party's) makes its actor an
  :class:`ActorSource`: its tokenizer, model config, device and dtype, its weights as HF-named
  full tensors one at a time (:meth:`ActorSource.hf_weights`), and optionally a zero-copy
  module (:meth:`ActorSource.live_hf_module`) or its generation shards through the
  3D-HybridEngine (:meth:`ActorSource.generation_shards`);
- every **rollout backend** (the shipped ones and a third party's) subclasses
  :class:`RolloutBackend` and is registered with ``hfsdk_register_rollout_backends``. It is
  built once per actor worker by :func:`build_rollout` and must work with any actor that
  satisfies the protocol: it picks its path from what the actor offers, never from which
  backend the actor is.

Workers build rollouts only through :func:`build_rollout`; the worker asks the rollout
(``collective``) whether every rank of the actor's group takes part in a call, and tells it
after every update (:meth:`RolloutBackend.update_weights`). Besides whole batches
(:meth:`RolloutBackend.generate_sequences`) a rollout serves single requests
(:class:`GenerationRequest` → :class:`GenerationResult`, token-in / token-out) with many in
flight (:meth:`RolloutBackend.generate_request`), the base of multi-turn agent loops.
See ``docs/plugin_hooks.md`` for a worked example.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import math
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from hfsdk.core.errors import HfsdkError
from hfsdk.core.generation_requests import GenerationRequest, GenerationResult

if TYPE_CHECKING:
    import torch

    from hfsdk.core.batch import Batch
    from hfsdk.core.generation_strategy import GenerationStrategy
    from hfsdk.core.role_config import RolloutConfig


@attrs.frozen(kw_only=True)
class DataParallelInfo:
    """The actor's data-parallel group as a rollout sees it.

    ``group`` is the ``torch.distributed`` process group over which metrics are
    agreed (``None`` when the actor is one process); ``size``/``rank`` place this
    rank in it. Every data-parallel rank generates its own share of the prompts.
    ``collects``: whether this rank's rollout outputs are the ones the worker
    returns (one rank per data-parallel replica; a tensor- or pipeline-parallel
    actor has ranks that do not). The members of ``group`` all collect or none do.
    """

    size: int = 1
    rank: int = 0
    group: Any = None
    collects: bool = True
    actor_group: Any = None
    """The process group of all the actor's ranks (``None``: the default group), over which a
    rollout agrees that a per-rank step (an engine reload) succeeded everywhere."""

    @property
    def distributed(self) -> bool:
        """Whether there is more than one data-parallel rank."""
        return self.size > 1


class ActorSource(Protocol):
    """What every training backend's actor engine offers a rollout backend.

    Attributes: ``tokenizer`` (a transformers tokenizer with a pad token), ``hf_config`` (the
    actor's transformers ``PretrainedConfig``), ``model_path`` (the HF model directory the actor
    started from: architecture and first weights, for an engine that loads its own copy),
    ``generation_eos_ids`` (EOS ids of the model directory's generation config, may be empty),
    ``device`` and ``compute_dtype`` (the torch device and dtype generation should run in),
    ``dp`` (:class:`DataParallelInfo`) and ``weights_version`` (incremented by every update and
    checkpoint load, so a rollout that keeps a copy knows when it is stale),
    ``last_weights_metrics`` (what the last complete :meth:`hf_weights` iteration cost this
    rank: ``perf/reshard_bytes`` received, ``perf/reshard_peak_extra_bytes`` held beyond the
    training shard; empty before the first), ``weight_probes`` (name → a probe of every tensor
    :meth:`hf_weights` yields that the actor computes rather than holds, a LoRA merge: the
    expected product of that tensor with a fixed vector and its tolerance, set before the tensor
    is yielded, so a receiver checks each as it arrives without redoing the merge; the backends
    define the probe and its check; empty for an actor that sends only what it holds).
    """

    tokenizer: Any
    hf_config: Any
    model_path: Any
    generation_eos_ids: list[int]
    device: torch.device
    compute_dtype: torch.dtype
    dp: DataParallelInfo
    weights_version: int
    last_weights_metrics: dict[str, float]
    weight_probes: dict[str, Any]

    def hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The actor's current weights as (HF parameter name, full tensor), one at a time.

        Layer order, in the compute dtype; collective over the actor's ranks (every rank
        iterates it to the end). Tied weights appear once, under the name transformers'
        ``named_parameters()`` gives them (the embedding); a consumer that keeps an untied
        output layer copies it from there. A yielded tensor is valid until the iterator
        advances.
        """
        ...

    def live_hf_module(
        self, *, gather: bool = False
    ) -> contextlib.AbstractContextManager[torch.nn.Module | None]:
        """The actor's own HF module when it can generate as is (zero copy), else ``None``.

        ``gather=True`` lets a sharded actor gather its full weights into its
        own module for the context (a full copy per rank, no rebuild); it is
        collective then, and the actor checks the gathered parameters against its shards
        (a mismatch raises an :class:`hfsdk.HfsdkError` naming it; a clean gather sets
        ``sync/verified`` in ``last_weights_metrics``, where a module that moved nothing
        sets none). The module is in eval mode under ``torch.no_grad``.
        """
        ...

    def generation_shards(self, config: RolloutConfig) -> Any | None:
        """This rank's place in the generation layout for ``config`` (3D-HybridEngine), or ``None``.

        The handle's type is the backends' own (the shipped backends and rollouts
        share theirs in their common package, docs/hybrid_engine.md): resharding is
        a feature of the backends that offer it, not of the contract.

        Built once per rollout (it may create process groups: collective over
        the actor's ranks); moves no weights. ``None`` means the actor offers
        no resharding for this model or layout; the rollout then uses
        :meth:`hf_weights`.
        """
        ...


class RolloutBackend(abc.ABC):
    """A rollout (generation) backend, built once per actor worker.

    Subclasses implement :meth:`generate_sequences`; they may override :meth:`build` (choose a
    path from what the actor offers), :meth:`update_weights` and :meth:`close`. ``collective``
    (a class default an instance may change in ``__init__``) says whether every rank of the
    actor's group calls :meth:`generate_sequences` together (a resharding or tensor-parallel
    decode, or a call that reads :meth:`ActorSource.hf_weights`); the worker then keeps the
    outputs of the ranks whose ``actor.dp.collects`` and drops the others'. Otherwise only the
    collecting ranks call it, each with its own share of the prompts, and nothing in the call
    may be collective over ranks that do not collect.

    :meth:`update_weights` is called on every rank of the actor after every
    update and checkpoint load; it may read :meth:`ActorSource.hf_weights`
    (collective). If it raises on one rank, it must raise on all of them
    (agree on success before returning), or the other ranks wait in the next
    collective until its timeout.

    Output batch (see docs/backends.md): ``prompts.meta['n']`` rows per prompt,
    the ``n`` responses of a prompt consecutive (``prompts.repeat(n, interleave=True)``),
    or, for step-wise trajectories, one row per segment with a ``segment_index``
    column, a trajectory's segments consecutive (:mod:`hfsdk.core.segments`);
    ``prompts``, ``responses`` (right-padded to ``max_response_length``),
    ``input_ids``, ``attention_mask``, ``position_ids``, ``response_mask``;
    optionally ``rollout_log_probs`` (log-probs of the sampled tokens); the
    prompts' non-tensor columns repeated per response plus ``response_text``;
    ``meta['temperature']`` (what the tokens were sampled at, 1 when greedy),
    ``meta['greedy']``, ``meta['rollout_metrics']`` (name -> number, this rank's
    own measurements). :func:`hfsdk.assemble_rollout` builds all of it from the
    repeated prompts and the generated tokens. When the worker collects several
    ranks' outputs it replaces their ``rollout_metrics`` by each metric's mean over
    the ranks, weighted by their rows (:func:`hfsdk.merge_rollout_metrics`), so a
    backend need not agree them; every other meta key must be equal on every
    collecting rank, or the outputs do not concatenate.
    """

    collective: bool = False
    reports_log_probs: bool = False
    """Whether :meth:`generate_sequences` returns ``rollout_log_probs`` (what rollout
    corrections and ``trainer.max_mismatch_kl`` read under ``trainer.pipeline: sync``)."""
    serves_requests: bool = False
    """Whether :meth:`generate_request` batches requests itself (continuous batching, many
    in flight, inside :meth:`serving`). A multi-turn runner then sends each turn as soon as
    it is ready; otherwise it batches the turns of all trajectories through
    :meth:`generate_sequences` (the one-row default would cost a call per request). A class
    default an instance may change (a property, or in ``__init__``)."""
    builds_from_actor_config: bool = False
    """Whether the rollout builds its model from ``actor.hf_config`` (so a source may hand it
    an edited config: ``hfsdk serve`` unties a tied LM head), not from ``actor.model_path``."""
    generation: GenerationStrategy | None = None
    """How workers generate with this rollout (:func:`hfsdk.generate_rollout`): set once by
    :func:`build_rollout` from the ``hfsdk_wrap_generation`` hook (``None`` until then)."""

    def __init__(self, config: RolloutConfig, actor: ActorSource) -> None:
        self.config = config
        self.actor = actor

    @classmethod
    def build(cls, config: RolloutConfig, actor: ActorSource) -> RolloutBackend:
        """The rollout for ``actor`` (override to pick a path from what the actor offers)."""
        return cls(config, actor)

    @abc.abstractmethod
    def generate_sequences(self, prompts: Batch) -> Batch:
        """Responses for ``prompts`` (``meta['n']`` per prompt, greedy if ``meta['greedy']``)."""

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Hold what :meth:`generate_request` needs (the weights) for a run of requests.

        A multi-turn runner enters it around all of one step's trajectories, so
        a backend that must gather or reshard the actor's weights does it once,
        not per request. Collective like :meth:`generate_sequences` when
        ``collective`` is true: every rank of the actor enters it (only the
        collecting ranks need send requests). The default holds nothing.
        """
        yield

    async def generate_request(self, request: GenerationRequest) -> GenerationResult:
        """Serve one request; many may be in flight at once (await them concurrently).

        The default serves it with :meth:`generate_sequences` on one row, one
        request at a time in a worker thread (so the event loop stays free for
        tools): it works for any backend, honours ``greedy``, ``seed``,
        ``max_new_tokens`` (up to the backend's response length) and
        ``stop_token_ids`` (cut after the first one), samples at the backend's
        configured temperature, and reports the backend's ``rollout_log_probs``
        when it returns them (NaN otherwise). It refuses a sampled request with a
        ``top_k`` (the backend's configured cut applies to every row) and one asking
        for ``prompt_logprobs``. Backends that batch requests (continuous batching)
        override it.
        """
        if request.prompt_logprobs:
            raise HfsdkError(
                f"{type(self).__name__} serves requests one row at a time and reports no "
                "prompt log-probs; send prompt_logprobs=False (score the prompt with the "
                "actor's forward) or use a backend that serves requests"
            )
        if request.top_k and not request.is_greedy:
            raise HfsdkError(
                f"{type(self).__name__} serves requests one row at a time with its configured "
                f"sampling settings and cannot apply top_k={request.top_k} per request; send "
                "top_k=0 (set rollout.top_k instead) or use a backend that serves requests"
            )
        lock = self.__dict__.setdefault("_one_row_lock", threading.Lock())

        def serve() -> GenerationResult:
            with lock:
                return self._serve_one_row(request)

        return await asyncio.to_thread(serve)

    def _serve_one_row(self, request: GenerationRequest) -> GenerationResult:
        """:meth:`generate_request`'s default body: ``generate_sequences`` on one row."""
        import torch

        from hfsdk.core.batch import Batch
        from hfsdk.core.rng import seeded_rng

        ids = torch.tensor([request.prompt_ids], dtype=torch.long)
        prompts = Batch.from_dict(
            tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
            meta={"n": 1, "greedy": request.is_greedy},
        )
        with seeded_rng(request.seed):
            out = self.generate_sequences(prompts)
        stops = set(request.stop_token_ids) | set(self.actor.generation_eos_ids)
        if self.actor.tokenizer.eos_token_id is not None:
            stops.add(int(self.actor.tokenizer.eos_token_id))
        row = out["responses"][0]
        if "response_mask" in out:
            width = int(out["response_mask"][0].sum())
        else:  # a minimal backend: what follows the first stop is padding
            ends = [i + 1 for i, t in enumerate(row.tolist()) if t in stops]
            width = ends[0] if ends else len(row)
        tokens = row[:width].tolist()
        logprobs = (
            out["rollout_log_probs"][0][:width].tolist()
            if "rollout_log_probs" in out
            else [math.nan] * len(tokens)
        )
        end = min(len(tokens), request.max_new_tokens)
        for i, token in enumerate(tokens[:end]):
            if token in stops:
                end = i + 1
                break
        reason = "stop" if end and tokens[end - 1] in stops else "length"
        return GenerationResult(
            token_ids=tokens[:end], logprobs=logprobs[:end], finish_reason=reason
        )

    def update_weights(self, actor: ActorSource) -> None:
        """The actor's weights changed (after an update or a checkpoint load).

        A rollout that generates from the actor's weights at every call does
        nothing; one that keeps its own copy reloads it now or before its next call.
        """
        return None

    def close(self) -> None:
        """Release engines and memory (called before the worker's process group goes)."""
        return None


def build_rollout(config: RolloutConfig, actor: ActorSource) -> RolloutBackend:
    """The rollout backend ``config.backend`` for ``actor``; the one way workers build one."""
    from hfsdk.core.plugin_manager import get_registry

    entry = get_registry("rollout_backends")[config.backend]
    impl = entry.impl
    if not (isinstance(impl, type) and issubclass(impl, RolloutBackend)):
        raise HfsdkError(
            f"rollout backend {config.backend!r} (plugin {entry.plugin!r}) registers "
            f"{impl!r}, which is not an hfsdk.RolloutBackend subclass; the plugin must "
            "implement the rollout contract (docs/plugin_hooks.md)"
        )
    rollout = impl.build(config, actor)
    if not isinstance(rollout, RolloutBackend):
        raise HfsdkError(
            f"rollout backend {config.backend!r} (plugin {entry.plugin!r}): build() returned "
            f"{type(rollout).__name__}, not an hfsdk.RolloutBackend"
        )
    from hfsdk.core.generation_strategy import resolve_generation

    resolve_generation(rollout)  # once per rollout: a plugin may generate in its place
    return rollout
