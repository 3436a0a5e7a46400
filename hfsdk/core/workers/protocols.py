"""Transfer protocols: how a controller call is split across ranks and how results come back.

A :class:`TransferProtocol` is a ``(dispatch, collect)`` pair. ``dispatch``
runs on the controller and returns a :class:`DispatchPlan` (which ranks run
with which arguments, whose results are collected, how many padding rows were
added); ``collect`` turns the collected ranks' results into the call's value.
Every protocol is a registry entry (``hfsdk.get_registry("transfer_protocols")``),
filled by the core's built-in plugin and by plugins through
``hfsdk_register_transfer_protocols``. ``docs/runtime.md`` has the table.

Arguments may be :class:`~hfsdk.core.workers.futures.CallFuture` objects from
other calls; the built-in dispatches turn them into per-rank
:class:`~hfsdk.core.workers.futures.DataRef` objects that workers resolve from
the object store themselves.

No torch or ray at import time.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.decorator import Protocol
from hfsdk.core.workers.futures import CallFuture, CollectSpec, DataRef, take_single
from hfsdk.core.workers.mesh import MeshPosition

Layout = Literal["concat", "list", "other"]
"""How a protocol's collected value relates to the ranks' results.

``concat``: the rows of the collected results, concatenated, minus the padding
(a future of it can be split by rows again); ``list``: the collected results
as a list, one per rank (a future of it can be handed out per rank);
``other``: anything else (a future of it can only be passed whole).
"""


@attrs.frozen(kw_only=True)
class DispatchContext:
    """What a dispatch function knows about the call."""

    role: str
    method: str
    protocol: str
    world_size: int
    options: Mapping[str, Any] = attrs.field(factory=dict)
    mesh_lookup: Callable[[str], tuple[MeshPosition, ...]] | None = None

    def error(self, message: str) -> HfsdkError:
        """An error prefixed with ``role.method (protocol)``."""
        return HfsdkError(f"{self.role}.{self.method} ({self.protocol}): {message}")

    def mesh(self) -> tuple[MeshPosition, ...]:
        """Every rank's position in the mesh named by the ``mesh=`` option of ``@register``."""
        name = self.options.get("mesh")
        if not isinstance(name, str) or not name:
            raise self.error(
                "needs the name of a mesh; register the method with "
                f"@register(protocol=Protocol.{self.protocol.upper()}, mesh='<name>')"
            )
        if self.mesh_lookup is None:
            raise self.error("mesh positions are only known inside a WorkerGroup")
        return self.mesh_lookup(name)


@attrs.frozen(kw_only=True)
class DispatchPlan:
    """Which ranks run with which ``(args, kwargs)``, and what collect gets.

    ``collect_ranks`` lists the ranks whose results collect receives, in that
    order (default: every rank that runs, by rank); the other ranks still run
    but send no result back. ``pad`` is the number of padding rows appended to
    the split data (collect removes them); ``state`` is free for the protocol.
    """

    calls: Mapping[int, tuple[tuple[Any, ...], dict[str, Any]]]
    collect_ranks: tuple[int, ...] | None = None
    pad: int = 0
    state: Any = None

    def collect_spec(self) -> CollectSpec:
        """The part of the plan collect needs (no arguments, so it is cheap to keep)."""
        ranks = self.collect_ranks if self.collect_ranks is not None else tuple(sorted(self.calls))
        return CollectSpec(ranks=tuple(ranks), pad=self.pad, state=self.state)


Dispatch = Callable[[DispatchContext, tuple[Any, ...], dict[str, Any]], DispatchPlan]
Collect = Callable[[list[Any], CollectSpec], Any]


@attrs.frozen(kw_only=True)
class TransferProtocol:
    """A named ``(dispatch, collect)`` pair.

    ``collect`` must be a module-level function (workers run it when they
    resolve a future of this protocol passed whole to another group).
    """

    name: str
    dispatch: Dispatch
    collect: Collect
    layout: Layout = attrs.field(
        default="other", validator=attrs.validators.in_(("concat", "list", "other"))
    )
    doc: str = ""

    def __attrs_post_init__(self) -> None:
        if not callable(self.dispatch) or not callable(self.collect):
            raise HfsdkError(
                f"transfer protocol {self.name!r}: dispatch and collect must be callables"
            )


PAD_ROWS_META = "dispatch_pad_rows"
"""Meta key of a split batch: how many of its last rows are padding added by the dispatch.

Training protocols (``dp_compute_metric``) set it on every piece they hand a
rank, 0 included; :func:`padding_rows` reads it. Padding rows repeat real rows
only so that every rank runs the same collectives: a method that learns from
its batch must give them no weight (the fsdp engines zero their response mask).
"""


def padding_rows(batch: Any) -> int:
    """How many of ``batch``'s last rows are dispatch padding (0 when it was not marked)."""
    rows = int(batch.meta.get(PAD_ROWS_META, 0))
    if not 0 <= rows <= len(batch):
        raise HfsdkError(
            f"batch meta {PAD_ROWS_META!r}={rows} for a batch of {len(batch)} rows; it must count "
            "the trailing padding rows the dispatch added (do not set it by hand)"
        )
    return rows


def _mark_padding(pad: int, parts_after: int, value: Any) -> Any:
    """``value`` (a batch piece) with :data:`PAD_ROWS_META` set.

    The pieces are equal, and padding fills the last ``pad`` rows of all of
    them together, so a piece followed by ``parts_after`` others holds
    ``clamp(pad - parts_after * rows, 0, rows)`` of them.
    """
    rows = len(value)
    marked = value.index(slice(0, rows))  # a view with its own meta dict
    marked.meta[PAD_ROWS_META] = min(rows, max(0, pad - parts_after * rows))
    return marked


def _mark_resolved_padding(pad: int, parts_after: int, transform: Any, values: list[Any]) -> Any:
    """DataRef transform: assemble the piece with ``transform``, then mark its padding rows."""
    return _mark_padding(pad, parts_after, transform(values))


# ---------------------------------------------------------------------- helpers for dispatches


def _is_batch(value: Any) -> bool:
    # Only a loaded batch module can have made a Batch; don't import it (and tensordict) here.
    batch_module = sys.modules.get("hfsdk.core.batch")
    return batch_module is not None and isinstance(value, batch_module.Batch)


def _describe(value: Any) -> str:
    if isinstance(value, CallFuture):
        return f"a future of {value.source} ({value.protocol.name})"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of length {len(value)}"
    return type(value).__name__


def broadcast_value(value: Any) -> Any:
    """``value`` as every rank receives it (a future becomes a reference to its whole value)."""
    return value.as_data_ref() if isinstance(value, CallFuture) else value


def broadcast_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """All arguments as every rank receives them."""
    return tuple(broadcast_value(a) for a in args), {
        k: broadcast_value(v) for k, v in kwargs.items()
    }


def per_rank_items(ctx: DispatchContext, name: str, value: Any) -> list[Any]:
    """One item per rank from a list of ``world_size`` items or a per-rank (``list``) future."""
    size = ctx.world_size
    if isinstance(value, (list, tuple)) and len(value) == size:
        return list(value)
    if (
        isinstance(value, CallFuture)
        and value.protocol.layout == "list"
        and len(value.spec.ranks) == size
    ):
        return [value.shard_ref(i) for i in range(size)]
    raise ctx.error(
        f"argument {name} must be a list with one item per rank ({size} items), "
        f"got {_describe(value)}"
    )


def _even_bounds(total: int, parts: int) -> list[tuple[int, int]]:
    base, extra = divmod(total, parts)
    bounds, start = [], 0
    for j in range(parts):
        stop = start + base + (1 if j < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def row_segments(
    start: int, stop: int, total: int, shard_rows: Sequence[int]
) -> list[tuple[int, int, int]]:
    """Rows ``[start, stop)`` of the padded value as ``(shard, first, last)`` pieces.

    Rows at or beyond ``total`` are padding and wrap to the first rows, exactly
    as :meth:`~hfsdk.core.batch.Batch.pad_to_divisor` pads.
    """
    logical: list[tuple[int, int]] = []
    if start < min(stop, total):
        logical.append((start, min(stop, total)))
    position = max(start, total)
    while position < stop and total > 0:
        wrapped = (position - total) % total
        run = min(stop - position, total - wrapped)
        logical.append((wrapped, wrapped + run))
        position += run
    segments: list[tuple[int, int, int]] = []
    for first, last in logical:
        offset = 0
        for index, rows in enumerate(shard_rows):
            lo, hi = max(first, offset), min(last, offset + rows)
            if lo < hi:
                segments.append((index, lo - offset, hi - offset))
            offset += rows
    return segments or [(0, 0, 0)]


def _future_rows(ctx: DispatchContext, future: CallFuture) -> tuple[list[int], int]:
    rows = future.shard_rows()
    if any(r is None for r in rows):
        raise ctx.error(
            f"cannot split {_describe(future)}: its ranks returned values without rows; "
            "return a Batch or a list from that method, or pass future.result() instead"
        )
    return [int(r) for r in rows if r is not None], sum(int(r) for r in rows if r is not None)


def split_rows(
    ctx: DispatchContext,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    parts: int,
    *,
    kind: Literal["batch", "list"],
    skip: int = 0,
    mark_padding: bool = False,
) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]], int]:
    """Split every row-carrying argument into ``parts`` pieces; broadcast the others.

    ``kind="batch"`` splits :class:`~hfsdk.core.batch.Batch` arguments into
    equal parts, padding to a divisor of ``parts`` (returned as the pad size);
    ``kind="list"`` splits ``list`` arguments into near-equal contiguous parts
    without padding. Futures whose protocol collects by concatenation are split
    too: when they have exactly ``parts`` shards each piece is the matching
    shard (no waiting); otherwise the controller waits for their row counts
    (tiny) and each worker fetches only the rows it needs. The first ``skip``
    positional arguments are always broadcast. With ``mark_padding`` every
    batch piece (or the piece a worker assembles from a future) carries
    :data:`PAD_ROWS_META`, the number of its rows that are padding.
    """

    def splittable(value: Any) -> bool:
        if isinstance(value, CallFuture):
            return value.protocol.layout == "concat"
        return _is_batch(value) if kind == "batch" else isinstance(value, list)

    keys: list[int | str] = [i for i, a in enumerate(args) if i >= skip and splittable(a)]
    keys += [k for k, v in kwargs.items() if splittable(v)]
    if not keys:
        wanted = "Batch" if kind == "batch" else "list"
        raise ctx.error(
            f"got no {wanted} argument to split across ranks (arguments: "
            f"{[_describe(a) for a in args]}, {sorted(kwargs)}); pass a {wanted} or a future "
            "of one, or register the method with Protocol.ONE_TO_ALL"
        )

    def value_of(key: int | str) -> Any:
        return args[key] if isinstance(key, int) else kwargs[key]

    futures = [value_of(k) for k in keys if isinstance(value_of(k), CallFuture)]
    pieces: dict[int | str, list[Any]] = {}
    fast = (
        len(futures) == len(keys)
        and all(len(f.spec.ranks) == parts for f in futures)
        and len({f.spec.pad for f in futures}) == 1
        and (kind == "batch" or futures[0].spec.pad == 0)
    )
    if fast:
        # Same number of shards as parts: hand shard j to part j without waiting.
        pad = futures[0].spec.pad
        for key in keys:
            pieces[key] = [value_of(key).shard_ref(j) for j in range(parts)]
    else:
        lengths: dict[int | str, int] = {}
        shard_rows: dict[int | str, list[int]] = {}
        for key in keys:
            value = value_of(key)
            if isinstance(value, CallFuture):
                shard_rows[key], total_with_pad = _future_rows(ctx, value)
                lengths[key] = total_with_pad - value.spec.pad
            else:
                lengths[key] = len(value)
        if len(set(lengths.values())) > 1:
            named = {(f"argument {k}" if isinstance(k, int) else k): n for k, n in lengths.items()}
            raise ctx.error(
                f"the arguments split across ranks have different lengths {named}; "
                "they must have the same number of rows"
            )
        total = next(iter(lengths.values()))
        pad = -total % parts if kind == "batch" else 0
        if kind == "batch":
            size = (total + pad) // parts
            bounds = [(j * size, (j + 1) * size) for j in range(parts)]
        else:
            bounds = _even_bounds(total, parts)
        for key in keys:
            value = value_of(key)
            if isinstance(value, CallFuture):
                if total == 0:
                    raise ctx.error(f"{_describe(value)} has no rows to split")
                rows = shard_rows[key]
                pieces[key] = [
                    value.segments_ref(row_segments(a, b, total, rows)) for a, b in bounds
                ]
            elif kind == "batch":
                padded, _ = value.pad_to_divisor(parts)
                pieces[key] = padded.chunk(parts)
            else:
                pieces[key] = [value[a:b] for a, b in bounds]

    if mark_padding and kind == "batch":
        for key, values in pieces.items():
            pieces[key] = [_mark_piece(piece, pad, parts - 1 - j) for j, piece in enumerate(values)]
    per_args: list[tuple[Any, ...]] = []
    per_kwargs: list[dict[str, Any]] = []
    base_args, base_kwargs = broadcast_arguments(args, kwargs)
    for j in range(parts):
        part_args = tuple(pieces[i][j] if i in pieces else a for i, a in enumerate(base_args))
        part_kwargs = {k: pieces[k][j] if k in pieces else v for k, v in base_kwargs.items()}
        per_args.append(part_args)
        per_kwargs.append(part_kwargs)
    return per_args, per_kwargs, pad


def _mark_piece(piece: Any, pad: int, parts_after: int) -> Any:
    if isinstance(piece, DataRef):
        return DataRef(
            result_refs=piece.result_refs,
            info_refs=piece.info_refs,
            source=piece.source,
            transform=functools.partial(_mark_resolved_padding, pad, parts_after, piece.transform),
        )
    return _mark_padding(pad, parts_after, piece)


def check_mesh(ctx: DispatchContext, positions: Sequence[MeshPosition]) -> tuple[int, int, int]:
    """Check the ranks' positions form one (pp, tp, dp) mesh; return ``(pp, tp, dp)``."""
    shapes = {(p.pp_size, p.tp_size, p.dp_size) for p in positions}
    if len(shapes) != 1:
        raise ctx.error(f"ranks declared different mesh shapes (pp, tp, dp): {sorted(shapes)}")
    pp, tp, dp = shapes.pop()
    if pp * tp * dp != len(positions):
        raise ctx.error(
            f"mesh pp={pp} x tp={tp} x dp={dp} = {pp * tp * dp} ranks, but the group has "
            f"{len(positions)}"
        )
    coords = [(p.pp_rank, p.tp_rank, p.dp_rank) for p in positions]
    if len(set(coords)) != len(coords):
        raise ctx.error("two ranks declared the same (pp, tp, dp) position")
    return pp, tp, dp


# ---------------------------------------------------------------------- built-in dispatches


def dispatch_one_to_all(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """Every rank receives the same arguments."""
    a, k = broadcast_arguments(args, kwargs)
    return DispatchPlan(calls={rank: (a, k) for rank in range(ctx.world_size)})


def dispatch_all_to_all(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """Every argument is a list of ``world_size`` items; rank ``i`` receives item ``i`` of each."""
    per_args = [per_rank_items(ctx, f"#{i}", a) for i, a in enumerate(args)]
    per_kwargs = {k: per_rank_items(ctx, repr(k), v) for k, v in kwargs.items()}
    calls = {
        rank: (
            tuple(items[rank] for items in per_args),
            {k: v[rank] for k, v in per_kwargs.items()},
        )
        for rank in range(ctx.world_size)
    }
    return DispatchPlan(calls=calls)


def dispatch_rank_zero(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """Only rank 0 runs, with the arguments as given."""
    return DispatchPlan(calls={0: broadcast_arguments(args, kwargs)})


def dispatch_dp_compute(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """Split every ``list`` argument into ``world_size`` contiguous parts; broadcast the rest."""
    per_args, per_kwargs, _ = split_rows(ctx, args, kwargs, ctx.world_size, kind="list")
    return DispatchPlan(calls={r: (per_args[r], per_kwargs[r]) for r in range(ctx.world_size)})


def dispatch_dp_compute_proto(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """Split every ``Batch`` argument into ``world_size`` equal parts, padding if needed."""
    per_args, per_kwargs, pad = split_rows(ctx, args, kwargs, ctx.world_size, kind="batch")
    return DispatchPlan(
        calls={r: (per_args[r], per_kwargs[r]) for r in range(ctx.world_size)}, pad=pad
    )


def dispatch_dp_compute_train(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """Split like :func:`dispatch_dp_compute_proto`, marking each piece's padding rows.

    Every piece carries :data:`PAD_ROWS_META`, so a training method can give
    the repeated rows no weight (see :func:`padding_rows`).
    """
    per_args, per_kwargs, pad = split_rows(
        ctx, args, kwargs, ctx.world_size, kind="batch", mark_padding=True
    )
    return DispatchPlan(
        calls={r: (per_args[r], per_kwargs[r]) for r in range(ctx.world_size)}, pad=pad
    )


def dispatch_dp_compute_proto_with_func(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """The first argument is a function every rank receives; ``Batch`` arguments are split."""
    if not args or not callable(args[0]):
        raise ctx.error(
            "the first argument must be a function sent to every rank (e.g. a reward "
            f"function), got {_describe(args[0]) if args else 'no arguments'}"
        )
    per_args, per_kwargs, pad = split_rows(ctx, args, kwargs, ctx.world_size, kind="batch", skip=1)
    return DispatchPlan(
        calls={r: (per_args[r], per_kwargs[r]) for r in range(ctx.world_size)}, pad=pad
    )


def dispatch_mesh_proto(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """Split ``Batch`` arguments by the dp rank of a (pp, tp, dp) mesh.

    Every tp/pp rank of a dp rank receives that dp shard; results come only
    from tp rank 0 of the last pipeline stage (or the ranks whose
    ``MeshPosition.collect`` says so), one per dp rank, in dp order.
    """
    positions = ctx.mesh()
    _, _, dp = check_mesh(ctx, positions)
    per_args, per_kwargs, pad = split_rows(ctx, args, kwargs, dp, kind="batch")
    calls = {r: (per_args[p.dp_rank], per_kwargs[p.dp_rank]) for r, p in enumerate(positions)}
    collectors = sorted((p.dp_rank, r) for r, p in enumerate(positions) if p.collects)
    if [d for d, _ in collectors] != list(range(dp)):
        raise ctx.error(
            "a mesh needs exactly one collecting rank per dp rank; collecting (dp rank, rank) "
            f"pairs are {collectors}"
        )
    return DispatchPlan(calls=calls, collect_ranks=tuple(r for _, r in collectors), pad=pad)


def dispatch_pp_as_dp(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """Treat pipeline stages as extra data-parallel ranks: ``dp * pp`` shards.

    The rank at (pp_rank, dp_rank) receives shard ``dp_rank * pp + pp_rank``
    (every tp rank of it the same shard); results come from tp rank 0 of every
    (dp, pp) pair, in shard order.
    """
    positions = ctx.mesh()
    pp, _, dp = check_mesh(ctx, positions)
    per_args, per_kwargs, pad = split_rows(ctx, args, kwargs, dp * pp, kind="batch")

    def shard(p: MeshPosition) -> int:
        return p.dp_rank * pp + p.pp_rank

    calls = {r: (per_args[shard(p)], per_kwargs[shard(p)]) for r, p in enumerate(positions)}
    collectors = sorted((shard(p), r) for r, p in enumerate(positions) if p.tp_rank == 0)
    return DispatchPlan(calls=calls, collect_ranks=tuple(r for _, r in collectors), pad=pad)


# ---------------------------------------------------------------------- built-in collects


def collect_list(results: list[Any], spec: CollectSpec) -> list[Any]:
    """The collected ranks' results as a list, in collect order."""
    return list(results)


def collect_concat_lists(results: list[Any], spec: CollectSpec) -> list[Any]:
    """The ranks' list results joined into one list."""
    out: list[Any] = []
    for rank, result in zip(spec.ranks, results, strict=True):
        if not isinstance(result, (list, tuple)):
            raise HfsdkError(
                f"dp_compute: rank {rank} returned {_describe(result)}; methods using "
                "dp_compute must return a list (one item per input item)"
            )
        out.extend(result)
    return out


def collect_concat_batches(results: list[Any], spec: CollectSpec) -> Any:
    """The ranks' ``Batch`` results concatenated, with the dispatch's padding rows removed."""
    from hfsdk.core.batch import Batch

    for rank, result in zip(spec.ranks, results, strict=True):
        if not isinstance(result, Batch):
            raise HfsdkError(
                f"rank {rank} returned {_describe(result)}; methods whose results are "
                "concatenated (dp_compute_proto, mesh_proto, pp_as_dp) must return a Batch"
            )
    out = results[0] if len(results) == 1 else Batch.concat(results)
    if spec.pad:
        if spec.pad > len(out):
            raise HfsdkError(
                f"cannot remove {spec.pad} padding rows from a result of {len(out)} rows; "
                "methods must return one row per input row when the batch was padded"
            )
        out = out.unpad(spec.pad)
    return out


def collect_rank_zero(results: list[Any], spec: CollectSpec) -> Any:
    """Rank 0's result as is."""
    return take_single(results)


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool | int | float):
        return [float(value)]
    if hasattr(value, "tolist"):  # tensors and numpy values
        return _numbers(value.tolist())
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _numbers(item)]
    raise TypeError(type(value).__name__)


def collect_mean_metrics(results: list[Any], spec: CollectSpec) -> dict[str, float]:
    """Metric dicts from every rank averaged key by key (lists and tensors are flattened).

    The plain mean is right for values every rank holds alike (learning rate,
    gradient norm) and for per-rank *shares* scaled by the rank count (the fsdp
    engines report losses and per-token means as ``share × dp_size``, weighted
    by their valid tokens, so ranks with unequal valid tokens, padding rows
    included, average to the global value).
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for rank, result in zip(spec.ranks, results, strict=True):
        if not isinstance(result, Mapping):
            raise HfsdkError(
                f"dp_compute_metric: rank {rank} returned {_describe(result)}; return a dict "
                "of metric name to number (or list of numbers)"
            )
        for key, value in result.items():
            try:
                numbers = _numbers(value)
            except TypeError as exc:
                raise HfsdkError(
                    f"dp_compute_metric: rank {rank} metric {key!r} is a {exc}; metrics must "
                    "be numbers, lists of numbers or tensors"
                ) from None
            sums[key] = sums.get(key, 0.0) + sum(numbers)
            counts[key] = counts.get(key, 0) + len(numbers)
    return {key: sums[key] / counts[key] for key in sums if counts[key]}


# ---------------------------------------------------------------------- the built-in table


def _builtin(
    member: Protocol, dispatch: Dispatch, collect: Collect, layout: Layout, doc: str
) -> TransferProtocol:
    return TransferProtocol(
        name=member.value, dispatch=dispatch, collect=collect, layout=layout, doc=doc
    )


BUILTIN_PROTOCOLS: Mapping[str, TransferProtocol] = {
    p.name: p
    for p in (
        _builtin(
            Protocol.ONE_TO_ALL,
            dispatch_one_to_all,
            collect_list,
            "list",
            "Same arguments to every rank; returns the list of per-rank results.",
        ),
        _builtin(
            Protocol.ALL_TO_ALL,
            dispatch_all_to_all,
            collect_list,
            "list",
            "Each argument is a list with one item per rank; returns the per-rank results.",
        ),
        _builtin(
            Protocol.RANK_ZERO,
            dispatch_rank_zero,
            collect_rank_zero,
            "concat",
            "Runs on rank 0 only; returns its result.",
        ),
        _builtin(
            Protocol.DP_COMPUTE,
            dispatch_dp_compute,
            collect_concat_lists,
            "concat",
            "Splits list arguments into contiguous parts per rank; joins the list results.",
        ),
        _builtin(
            Protocol.DP_COMPUTE_PROTO,
            dispatch_dp_compute_proto,
            collect_concat_batches,
            "concat",
            "Splits Batch arguments per rank (auto-padding); concatenates and unpads results.",
        ),
        _builtin(
            Protocol.DP_COMPUTE_PROTO_WITH_FUNC,
            dispatch_dp_compute_proto_with_func,
            collect_concat_batches,
            "concat",
            "First argument (a function) to every rank, Batch arguments split; concatenates.",
        ),
        _builtin(
            Protocol.DP_COMPUTE_METRIC,
            dispatch_dp_compute_train,
            collect_mean_metrics,
            "other",
            "Splits Batch arguments like dp_compute_proto, marking padding rows (meta "
            "dispatch_pad_rows) for training methods to ignore; averages the metric dicts.",
        ),
        _builtin(
            Protocol.MESH_PROTO,
            dispatch_mesh_proto,
            collect_concat_batches,
            "concat",
            "Splits by the dp rank of a (pp, tp, dp) mesh; collects tp 0 of the last stage.",
        ),
        _builtin(
            Protocol.PP_AS_DP,
            dispatch_pp_as_dp,
            collect_concat_batches,
            "concat",
            "Splits into dp*pp shards (pp stages as extra dp ranks); collects tp rank 0.",
        ),
    )
}
"""The built-in protocols by registry name (registered by ``hfsdk.core.builtin_plugin``)."""


# ---------------------------------------------------------------------- lookup


def as_transfer_protocol(name: str, impl: Any) -> TransferProtocol:
    """A registry entry's implementation as a :class:`TransferProtocol`.

    Plugins may register a ``TransferProtocol`` or a plain ``(dispatch, collect)`` pair.
    """
    if isinstance(impl, TransferProtocol):
        return impl
    if isinstance(impl, (tuple, list)) and len(impl) == 2 and all(callable(f) for f in impl):
        return TransferProtocol(name=name, dispatch=impl[0], collect=impl[1])
    raise HfsdkError(
        f"transfer protocol {name!r} is registered as {impl!r}; expected a TransferProtocol "
        "or a (dispatch, collect) pair of functions"
    )


def lookup_protocol(name: str) -> TransferProtocol:
    """The protocol registered as ``name`` (upper-case enum names are accepted too)."""
    from hfsdk.core.registry import get_registry

    registry = get_registry("transfer_protocols")
    if name not in registry and name.lower() in registry:
        name = name.lower()
    return as_transfer_protocol(name, registry[name].impl)


def resolve_protocol(protocol: Protocol | str | TransferProtocol) -> TransferProtocol:
    """What ``@register(protocol=...)`` names, as a :class:`TransferProtocol`."""
    if isinstance(protocol, TransferProtocol):
        return protocol
    if isinstance(protocol, Protocol):
        return lookup_protocol(protocol.value)
    if isinstance(protocol, str):
        return lookup_protocol(protocol)
    if hasattr(protocol, "dispatch") and hasattr(protocol, "collect"):
        return as_transfer_protocol(getattr(protocol, "name", "custom"), protocol)
    raise HfsdkError(
        f"unknown protocol {protocol!r}; expected a Protocol member, a registered name or a "
        "TransferProtocol"
    )
