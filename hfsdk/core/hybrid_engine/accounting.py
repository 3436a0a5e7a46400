"""Bytes a rank receives in a transition, by formula, and a tracker of extra memory.

The formula is the micro-DP gather of :class:`~hfsdk_backend_common.hybrid.reshard.HybridEngine`
written in closed form per parameter (the engine counts what it actually
receives; tests compare the two). The minimum any scheme can reach is the
generation shard minus the training shard; the engine exceeds it only by the
tensor-replicated norm vectors, which non-source members of the same stage
receive again (one broadcast per group is cheaper than one group per holder).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from hfsdk.core.hybrid_engine.layout import GenLayout, TrainLayout, place
from hfsdk.core.hybrid_engine.param_spec import ParamSpec


def generation_specs(
    specs: Sequence[ParamSpec], train: TrainLayout, gen: GenLayout, gen_stage: int, num_layers: int
) -> list[ParamSpec]:
    """The weights of generation stage ``gen_stage`` (in ``specs`` order)."""
    a = train.p // gen.pg
    return [s for s in specs if s.stage(train.p, num_layers) // a == gen_stage]


@attrs.frozen
class TransitionBytes:
    """Per-rank byte counts of one train -> generate transition."""

    received: int
    generation_shard: int
    training_shard: int

    @property
    def minimum(self) -> int:
        """What a rank must receive at least: its generation shard minus its training shard."""
        return self.generation_shard - self.training_shard


def transition_bytes(
    specs: Sequence[ParamSpec],
    train: TrainLayout,
    gen: GenLayout,
    rank: int,
    num_layers: int,
    element_size: int,
) -> TransitionBytes:
    """Bytes ``rank`` receives, and its shard sizes, in the micro-DP transition."""
    pl = place(train, gen, rank)
    b = train.t // gen.tg
    received = gen_total = train_total = 0
    for spec in generation_specs(specs, train, gen, pl.gen_stage, num_layers):
        mine = spec.stage(train.p, num_layers) == pl.stage
        gen_bytes = spec.shard_numel(gen.tg) * element_size
        own = spec.shard_numel(train.t) * element_size if mine else 0
        gen_total += gen_bytes
        train_total += own
        if spec.split is not None:
            received += gen_bytes - own
        elif not (mine and pl.tp % b == 0):
            received += gen_bytes
    return TransitionBytes(received, gen_total, train_total)


def uniform_transition_bytes(
    num_params: float, train: TrainLayout, gen: GenLayout, element_size: int = 2
) -> float:
    """Per-rank bytes received for a model whose weights split evenly (the planner's model).

    The generation shard is ``N/(pg*tg)`` parameters, the training shard
    ``N/(p*t)``; a rank receives the difference, ``(dg-1)/dg`` of its
    generation shard. Exact for the tensor-split weights of
    :func:`transition_bytes`; the replicated norms add well under 0.1%.
    """
    gen_shard = num_params / (gen.pg * gen.tg) * element_size
    return gen_shard * (gen.dg - 1) / gen.dg


def transition_collectives(
    num_layers: int, train: TrainLayout, gen: GenLayout, gen_stage: int = 0
) -> int:
    """Broadcasts a rank of generation stage ``gen_stage`` makes in a transition (grouped QKV).

    Per decoder layer: with b = t/tg > 1, each of the b holders sends its
    slice of every part (QKV 1, proj 1, gate/up 2, down 1) plus one broadcast
    per norm; with b = 1 one broadcast per weight. The embedding (first
    stage) and output layer (last stage) take b broadcasts each (one when
    b = 1), the final norm one. None when dg = 1. The planner's latency term.
    """
    if gen.dg == 1:
        return 0
    b = train.t // gen.tg
    calls = num_layers // gen.pg * (5 * b + 2 if b > 1 else 6)
    if gen_stage == 0:
        calls += b
    if gen_stage == gen.pg - 1:
        calls += b + 1
    return calls


class MemoryTracker:
    """Bytes a transition holds beyond the training shard: current and peak.

    On CUDA the allocator's own peak (``torch.cuda.max_memory_allocated``) is
    reported too; on CPU the engine's accounting of what it allocates is the
    measure.
    """

    def __init__(self) -> None:
        self.current = 0
        self.peak = 0

    def alloc(self, nbytes: int) -> None:
        """Account ``nbytes`` newly held."""
        self.current += nbytes
        self.peak = max(self.peak, self.current)

    def free(self, nbytes: int) -> None:
        """Account ``nbytes`` released."""
        self.current -= nbytes

    def reset(self) -> None:
        """Forget everything (after the generation shard was dropped)."""
        self.current = 0
        self.peak = 0
