"""Splitting a call's arguments over ranks: rows, padding to a divisor, futures, meshes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import Any, Literal

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.futures import CallFuture, DataRef
from hfsdk.core.workers.mesh import MeshPosition
from hfsdk.core.workers.protocols.types import DispatchContext

PAD_ROWS_META = "dispatch_pad_rows"
"""Meta key of a split batch: how many of its last rows are padding added by the dispatch.

Training protocols (``dp_compute_metric``) set it on every piece they hand a
rank, 0 included; :func:`padding_rows` reads it. Padding rows repeat real rows
only so that every rank runs the same collectives: a method that learns from
its batch must give them no weight (training engines zero their response mask).
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
    # Only a loaded batch module can have made a Batch; don't import it (and torch) here.
    batch_module = sys.modules.get("hfsdk.core.batch")
    return batch_module is not None and isinstance(value, batch_module.Batch)


def describe_value(value: Any) -> str:
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
        f"got {describe_value(value)}"
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
            f"cannot split {describe_value(future)}: its ranks returned values without rows; "
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
            f"{[describe_value(a) for a in args]}, {sorted(kwargs)}); pass a {wanted} or a future "
            "of one, or register the method with BuiltinProtocol.ONE_TO_ALL"
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
        batches = [v for v in map(value_of, keys) if _is_batch(v)]
        group = max([sys.modules["hfsdk.core.batch"].row_group(b) for b in batches] or [1])
        pad = -total % (parts * group) if kind == "batch" else 0  # row groups (pairs) stay whole
        step = (total + pad) // parts
        even = [(j * step, (j + 1) * step) for j in range(parts)]
        bounds = even if kind == "batch" else _even_bounds(total, parts)
        for key in keys:
            value = value_of(key)
            if isinstance(value, CallFuture):
                if total == 0:
                    raise ctx.error(f"{describe_value(value)} has no rows to split")
                rows = shard_rows[key]
                pieces[key] = [
                    value.segments_ref(row_segments(a, b, total, rows)) for a, b in bounds
                ]
            elif kind == "batch":
                padded, _ = value.pad_to_divisor(parts * group)
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
