"""Training and generation layouts of the actor, and how ranks regroup between them.

Rank order inside the world is megatron-core's default (``tp-dp-pp``): the
tensor-parallel rank varies fastest, then the data-parallel rank, then the
pipeline stage, ``rank = j + t * (r + d * i)`` for stage ``i``, tensor rank
``j`` and replica ``r``.

Regrouping (HybridFlow §5): inside one training replica, the ranks of a
micro data-parallel group are the ``p/pg`` consecutive stages times ``t/tg``
consecutive tensor ranks whose training shards together make one generation
shard. Each rank's generation shard therefore contains its training shard; the
``dg`` members of a group are the ``dg`` generation replicas' copies of that
shard, and a generation tensor-parallel group takes one member (the same
local index ``k``) from each of the ``tg`` groups of a generation stage.
"""

from __future__ import annotations

import attrs

from hfsdk import HfsdkError


def _positive(_inst: object, attr: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HfsdkError(f"layout size {attr.name}={value!r}; expected a positive integer")


@attrs.frozen
class TrainLayout:
    """Pipeline (``p``), tensor (``t``) and data (``d``) parallel sizes of the actor's training."""

    p: int = attrs.field(validator=_positive)
    t: int = attrs.field(validator=_positive)
    d: int = attrs.field(default=1, validator=_positive)

    @property
    def world(self) -> int:
        """Ranks the layout spans."""
        return self.p * self.t * self.d

    def coords(self, rank: int) -> tuple[int, int, int]:
        """``(stage, tensor rank, replica)`` of a global rank."""
        j = rank % self.t
        r = (rank // self.t) % self.d
        i = rank // (self.t * self.d)
        return i, j, r

    def rank(self, i: int, j: int, r: int) -> int:
        """Global rank of stage ``i``, tensor rank ``j``, replica ``r``."""
        return j + self.t * (r + self.d * i)

    def __str__(self) -> str:
        return f"(p={self.p}, t={self.t}, d={self.d})"


@attrs.frozen
class GenLayout:
    """Generation layout: ``pg`` stages, ``tg`` tensor ranks, ``dg`` micro replicas per replica."""

    pg: int = attrs.field(validator=_positive)
    tg: int = attrs.field(validator=_positive)
    dg: int = attrs.field(validator=_positive)

    def __str__(self) -> str:
        return f"(pg={self.pg}, tg={self.tg}, dg={self.dg})"


def generation_layout(train: TrainLayout, *, tp: int, pp: int = 1) -> GenLayout:
    """The generation layout with ``tp`` tensor ranks and ``pp`` stages; dg follows from p * t."""
    mp = train.p * train.t
    if tp < 1 or pp < 1 or mp % (tp * pp):
        raise HfsdkError(
            f"rollout layout (pp={pp}, tp={tp}) does not divide training layout {train}: "
            f"pp*tp must divide p*t={mp}; pick a rollout tp/pp whose product divides {mp}"
        )
    return GenLayout(pg=pp, tg=tp, dg=mp // (tp * pp))


@attrs.frozen(kw_only=True)
class HeadShape:
    """What a layout must divide: layers and attention heads."""

    num_layers: int
    num_heads: int
    num_kv_heads: int


def validate(train: TrainLayout, gen: GenLayout, shape: HeadShape) -> None:
    """Raise a one-line :class:`HfsdkError` unless ``gen`` is a regrouping of ``train``.

    Conditions: p * t = pg * tg * dg; pg divides p and tg divides t (so each
    generation shard is a union of whole training shards); t and tg divide
    the query heads and the key/value heads; p divides the layer count.
    """
    both = f"training layout {train} -> generation layout {gen}"
    if train.p * train.t != gen.pg * gen.tg * gen.dg:
        raise HfsdkError(
            f"{both}: p*t={train.p * train.t} but pg*tg*dg={gen.pg * gen.tg * gen.dg}; "
            "the generation layout must use the same ranks"
        )
    if train.p % gen.pg or train.t % gen.tg:
        raise HfsdkError(
            f"{both}: pg must divide p and tg must divide t so each rank's generation shard "
            "contains its training shard; choose rollout pp | p and tp | t"
        )
    for size, name in ((train.t, "t"), (gen.tg, "tg")):
        if shape.num_heads % size or shape.num_kv_heads % size:
            raise HfsdkError(
                f"{both}: {name}={size} does not divide the model's {shape.num_heads} query "
                f"heads and {shape.num_kv_heads} key/value heads; choose a divisor of both"
            )
    if shape.num_layers % train.p:
        raise HfsdkError(
            f"{both}: p={train.p} does not divide the model's {shape.num_layers} layers"
        )


@attrs.frozen
class RankPlace:
    """Where one rank sits in both layouts.

    ``group`` lists the global ranks of its micro-DP group in member order
    (member ``k`` = ``(i % a) * b + (j % b)`` with ``a = p/pg``, ``b = t/tg``);
    ``k`` is this rank's member index, which is also its generation replica
    inside the training replica; ``gen_stage`` and ``gen_tp`` are its
    generation pipeline stage and tensor rank.
    """

    rank: int
    stage: int
    tp: int
    replica: int
    group: tuple[int, ...]
    k: int
    gen_stage: int
    gen_tp: int


def place(train: TrainLayout, gen: GenLayout, rank: int) -> RankPlace:
    """The coordinates of ``rank`` in both layouts and its micro-DP group."""
    a, b = train.p // gen.pg, train.t // gen.tg
    i, j, r = train.coords(rank)
    gen_stage, gen_tp = i // a, j // b
    group = tuple(
        train.rank(gen_stage * a + ii, gen_tp * b + jj, r) for ii in range(a) for jj in range(b)
    )
    return RankPlace(
        rank=rank,
        stage=i,
        tp=j,
        replica=r,
        group=group,
        k=(i % a) * b + (j % b),
        gen_stage=gen_stage,
        gen_tp=gen_tp,
    )


def micro_dp_groups(train: TrainLayout, gen: GenLayout) -> list[tuple[int, ...]]:
    """Every micro-DP group of the world, in a fixed order (for ``new_group`` on all ranks)."""
    seen: dict[tuple[int, ...], None] = {}
    for rank in range(train.world):
        seen.setdefault(place(train, gen, rank).group, None)
    return list(seen)


def generation_tp_groups(train: TrainLayout, gen: GenLayout) -> list[tuple[int, ...]]:
    """Every generation tensor-parallel group: member ``k`` of the tg groups of one gen stage."""
    groups: dict[tuple[int, ...], None] = {}
    places = [place(train, gen, rank) for rank in range(train.world)]
    for pl in places:
        members = tuple(
            sorted(
                q.rank
                for q in places
                if (q.replica, q.gen_stage, q.k) == (pl.replica, pl.gen_stage, pl.k)
            )
        )
        groups.setdefault(members, None)
    return list(groups)


def generation_pp_groups(train: TrainLayout, gen: GenLayout) -> list[tuple[int, ...]]:
    """Every generation pipeline group: one rank per gen stage, same replica, k and gen tp."""
    groups: dict[tuple[int, ...], None] = {}
    places = [place(train, gen, rank) for rank in range(train.world)]
    for pl in places:
        members = tuple(
            q.rank
            for q in sorted(places, key=lambda q: q.gen_stage)
            if (q.replica, q.k, q.gen_tp) == (pl.replica, pl.k, pl.gen_tp)
        )
        groups.setdefault(members, None)
    return list(groups)
