"""The rollout contract: what a rollout backend implements and what it may ask of the actor.

Two sides meet here, and neither imports the other:

- a **training backend** (any installed one, or a third party's) makes its actor an
  :class:`ActorSource`: its tokenizer, model config, device and dtype, its
  weights as HF-named full tensors one at a time (:meth:`ActorSource.hf_weights`),
  and optionally a zero-copy module (:meth:`ActorSource.live_hf_module`) or its
  generation shards through the 3D-HybridEngine
  (:meth:`ActorSource.generation_shards`);
- a **rollout backend** (any installed one, or a third party's) subclasses
  :class:`RolloutBackend` and is registered with
  ``hfsdk_register_rollout_backends``. It is built once per actor worker by
  :func:`build_rollout` and must work with any actor that satisfies the
  protocol: it picks its path from what the actor offers, never from which
  backend the actor is.

Workers build rollouts only through :func:`build_rollout`; the worker asks the
rollout (``collective``) whether every rank of the actor's group takes part in
a call, and tells it after every update (:meth:`RolloutBackend.update_weights`).
See ``docs/plugin_hooks.md`` for a worked example.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    import torch

    from hfsdk.core.batch import Batch
    from hfsdk.core.role_config import RolloutConfig


@attrs.frozen(kw_only=True)
class DataParallelInfo:
    """The actor's data-parallel group as a rollout sees it.

    ``group`` is the ``torch.distributed`` process group over which metrics are
    agreed (``None`` when the actor is one process); ``size``/``rank`` place this
    rank in it. Every rank of that group generates its own share of the prompts.
    """

    size: int = 1
    rank: int = 0
    group: Any = None

    @property
    def distributed(self) -> bool:
        """Whether there is more than one data-parallel rank."""
        return self.size > 1


@attrs.frozen(kw_only=True)
class GenerationShards:
    """This rank's shard of the actor in its generation layout (the 3D-HybridEngine's output).

    ``weights`` maps megatron-format names (``decoder.layers.N.…``, grouped QKV,
    fused gate/up; see ``hfsdk_backend_common.hybrid.llama_format``) to this
    rank's slices at generation tensor-parallel size ``tg``; ``tp_group`` is the
    generation tensor group (``None`` at tg = 1), ``tp_rank`` this rank's place in
    it; ``stages`` the generation pipeline link (``None`` at pg = 1);
    ``shape`` the decoder's shape (``hfsdk_backend_common.hybrid.decoder.DecoderShape``);
    ``collects`` whether this rank's outputs are the ones collected (one rank
    per generation replica); ``metrics`` the transition's cost on this rank.
    ``release()`` frees the generation-only memory after the call.
    """

    weights: Any
    tg: int
    tp_rank: int
    tp_group: Any
    stages: Any
    shape: Any
    collects: bool
    metrics: dict[str, float] = attrs.field(factory=dict)
    release: Any = None


class ActorSource(Protocol):
    """What every training backend's actor engine offers a rollout backend.

    Attributes: ``tokenizer`` (a transformers tokenizer with a pad token),
    ``hf_config`` (the actor's transformers ``PretrainedConfig``),
    ``generation_eos_ids`` (EOS ids of the model directory's generation config,
    may be empty), ``device`` and ``compute_dtype`` (the torch device and dtype
    generation should run in), ``dp`` (:class:`DataParallelInfo`) and
    ``weights_version`` (incremented by every update, so a rollout that keeps a
    copy knows when it is stale).
    """

    tokenizer: Any
    hf_config: Any
    generation_eos_ids: list[int]
    device: torch.device
    compute_dtype: torch.dtype
    dp: DataParallelInfo
    weights_version: int

    def hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The actor's current weights as (HF parameter name, full tensor), one at a time.

        Layer order; collective over the actor's ranks (every rank iterates it
        to the end). Tied weights appear once, under the name transformers'
        ``named_parameters()`` gives them (the embedding); a consumer that keeps
        an untied output layer copies it from there.
        """
        ...

    def live_hf_module(self) -> contextlib.AbstractContextManager[torch.nn.Module | None]:
        """The actor's own HF module when it can generate as is (zero copy), else ``None``."""
        ...

    def generation_shards(self, config: RolloutConfig) -> GenerationShards | None:
        """This rank's generation shard for ``config`` (3D-HybridEngine), or ``None``.

        ``None`` means the actor offers no resharding for this model or layout;
        the rollout then uses :meth:`hf_weights`. Collective over the actor's ranks.
        """
        ...


class RolloutBackend(abc.ABC):
    """A rollout (generation) backend, built once per actor worker.

    Subclasses implement :meth:`generate_sequences`; they may override
    :meth:`build` (choose a path from what the actor offers), :meth:`update_weights`
    and :meth:`close`. ``collective`` says whether every rank of the actor's
    group calls :meth:`generate_sequences` together (a resharding or
    tensor-parallel decode); otherwise only the ranks whose outputs are collected
    do, each with its own share of the prompts.

    Output batch (see docs/backends.md): ``prompts``, ``responses`` (right-padded
    to ``max_response_length``), ``input_ids``, ``attention_mask``,
    ``position_ids``, ``response_mask``; optionally ``rollout_log_probs``
    (raw, temperature-only log-probs of the sampled tokens); the prompts'
    non-tensor columns repeated per response plus ``response_text``;
    ``meta['temperature']``, ``meta['greedy']``, ``meta['rollout_metrics']``.
    """

    collective: ClassVar[bool] = False

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
    return rollout
