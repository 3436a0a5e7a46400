"""Bytes a rank must receive in a transition, by formula, and a tracker of extra memory.

The formula does not follow any engine's communication pattern: per weight of
the rank's generation stage it counts what the rank *lacks*, the elements of
its generation slice that are not in its training shard. Because tg divides t
and pg divides p, a rank's training slice of a weight lies inside its
generation slice, so the total is the generation shard minus the training
shard: the least any scheme can deliver. The resharding engine (it lives with
the backends' shared model-format code) counts what it actually receives; the
tests require the two to be equal.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from hfsdk_backend_common.hybrid.layout import GenLayout, TrainLayout, place
from hfsdk_backend_common.hybrid.param_spec import ParamSpec


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
    """Bytes ``rank`` lacks for its generation shard (``received``), and its shard sizes."""
    pl = place(train, gen, rank)
    lacking = gen_total = train_total = 0
    for spec in generation_specs(specs, train, gen, pl.gen_stage, num_layers):
        gen_elems = spec.shard_numel(gen.tg)
        # Held: the rank's training slice when the weight is on its training stage. Its
        # tensor rank j sits in generation tensor rank j // (t/tg), whose slice contains it.
        held = spec.shard_numel(train.t) if spec.stage(train.p, num_layers) == pl.stage else 0
        lacking += (gen_elems - held) * element_size
        gen_total += gen_elems * element_size
        train_total += held * element_size
    return TransitionBytes(lacking, gen_total, train_total)


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
    num_layers: int,
    train: TrainLayout,
    gen: GenLayout,
    gen_stage: int = 0,
    stage: int | None = None,
) -> int:
    """Communication calls a rank of generation stage ``gen_stage`` makes (grouped QKV).

    ``stage`` is its training stage (``None``: the worst case over the stages).
    With ``a = p/pg`` and ``b = t/tg``, per decoder layer: when b > 1 each of
    the b holders sends its slice of every part (QKV 1, proj 1, gate/up 2,
    down 1) in one broadcast, when b = 1 one broadcast per weight. The two
    norms move only when a > 1: one broadcast each when b = 1; when b > 1 a
    holder sends each of its own stage's norms to the a - 1 members of its
    column that lack it and receives each other stage's norm once, ``4(a-1)``
    calls per own layer either way. The embedding (first stage) and output
    layer (last stage) take b broadcasts each (one when b = 1); the final
    norm moves like a layer norm (a - 1 sends from the last training stage, one
    receive elsewhere). None when dg = 1. The planner's latency term.
    """
    if gen.dg == 1:
        return 0
    a, b = train.p // gen.pg, train.t // gen.tg
    layers = num_layers // gen.pg
    if b > 1:
        calls = layers * 5 * b
        norm_calls = 4 * (a - 1) * (num_layers // train.p) if a > 1 else 0
    else:
        calls = layers * 4
        norm_calls = 2 * layers if a > 1 else 0
    calls += norm_calls
    if gen_stage == 0:
        calls += b
    if gen_stage == gen.pg - 1:
        calls += b
        if a > 1:
            holder = stage is None or stage == train.p - 1
            calls += a - 1 if b > 1 and holder else 1
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
