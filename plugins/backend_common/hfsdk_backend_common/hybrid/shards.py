"""The 3D-HybridEngine handle an actor offers a rollout: this rank's generation slices.

:meth:`hfsdk.ActorSource.generation_shards` returns one (or ``None``); the shipped
actors (fsdp at ``actor.rollout_layout.tp > 1``, megatron) and rollouts (hf, vLLM,
tensor-parallel replicas) share it through this package.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


class GenerationShards(abc.ABC):
    """This rank's place in the actor's generation layout (the 3D-HybridEngine), built once.

    An actor that can reshard its weights into a tensor-parallel generation
    layout returns one from :meth:`ActorSource.generation_shards`; a rollout
    then, for every call: :meth:`prompt_rows` (the rows this rank's generation
    replica decodes), :meth:`weights` (the transition: this rank's slices under
    megatron-format names: grouped QKV, fused gate/up; the shared backend package's
    ``hybrid.llama_format``),
    decodes with them, :meth:`release` (training resumes), and
    :meth:`own_rows` (this rank's rows of what its replica decoded). A rollout
    that keeps its own copy instead streams :meth:`hf_stream`.

    Attributes: ``tg`` (generation tensor-parallel size), ``tp_rank`` /
    ``tp_group`` / ``tp_ranks`` (this rank in its generation tensor group: its
    rank, the process group, ``None`` at tg = 1, and the group's global ranks),
    ``pg`` (generation pipeline stages) and ``stages`` (the pipeline link, a
    the shared package's ``hybrid.stages.StageLink``; ``None`` at pg = 1),
    ``shape`` (its ``hybrid.decoder.DecoderShape``).
    Every method is collective over the actor's ranks unless it says otherwise.
    """

    tg: int
    tp_rank: int
    tp_group: Any
    tp_ranks: tuple[int, ...]
    pg: int
    stages: Any
    shape: Any

    @abc.abstractmethod
    def prompt_rows(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pad_id: int,
        per_row: Sequence[torch.Tensor] = (),
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """The left-padded prompts this rank's generation replica decodes (all its ranks alike).

        ``per_row`` tensors (one row per prompt, e.g. sampling seeds) follow
        the prompts; returns ``(input_ids, attention_mask, per_row)``.
        """

    @abc.abstractmethod
    def own_rows(self, columns: list[torch.Tensor]) -> list[torch.Tensor]:
        """This rank's rows of each per-row tensor its replica decoded (in its prompts' order)."""

    @abc.abstractmethod
    def weights(self) -> Mapping[str, torch.Tensor]:
        """The transition: this rank's generation slices, held until :meth:`release`."""

    @abc.abstractmethod
    def release(self) -> None:
        """Drop the generation-only memory (after :meth:`weights` or :meth:`hf_stream`)."""

    @abc.abstractmethod
    def metrics(self) -> dict[str, float]:
        """The last transition's cost on this rank (``perf/reshard_*``, ``timing/reshard_s``)."""

    def hf_stream(self) -> Iterator[tuple[str, torch.Tensor]]:
        """This rank's generation weights as whole HF-named tensors, one at a time.

        For a rollout engine that keeps its own copy and cuts its own slices
        (vLLM): at tg > 1 every weight is gathered over the generation tensor
        group. A yielded tensor is valid until the iterator advances; the
        iterator releases the transition when exhausted. Actors that do not
        implement it leave such rollouts to :meth:`ActorSource.hf_weights`.
        """
        raise NotImplementedError(f"{type(self).__name__} does not stream HF-named weights")
