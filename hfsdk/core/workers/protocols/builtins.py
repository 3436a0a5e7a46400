"""The built-in dispatch and collect functions and the table the core registers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.decorator import BuiltinProtocol
from hfsdk.core.workers.futures import CollectSpec, take_single
from hfsdk.core.workers.protocols.rows import (
    broadcast_arguments,
    check_mesh,
    describe_value,
    per_rank_items,
    split_rows,
)
from hfsdk.core.workers.protocols.types import (
    Collect,
    Dispatch,
    DispatchContext,
    DispatchPlan,
    Layout,
    TransferProtocol,
)

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
            f"function), got {describe_value(args[0]) if args else 'no arguments'}"
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
                f"dp_compute: rank {rank} returned {describe_value(result)}; methods using "
                "dp_compute must return a list (one item per input item)"
            )
        out.extend(result)
    return out


def collect_concat_batches(results: list[Any], spec: CollectSpec) -> Any:
    """The ranks' ``Batch`` results concatenated, with the dispatch's padding rows removed
    (a rollout's step-wise trajectories: the padding rows' trajectories, all their segments).

    Rollout outputs' ``meta['rollout_metrics']`` (each rank's own measurements)
    are first reduced to their row-weighted mean over the ranks
    (:func:`~hfsdk.core.rollout_output.merge_rollout_metrics`); every other meta
    key must agree between ranks.
    """
    from hfsdk.core.batch import Batch
    from hfsdk.core.rollout_output import merge_rollout_metrics
    from hfsdk.core.segments import trajectory_rows

    for rank, result in zip(spec.ranks, results, strict=True):
        if not isinstance(result, Batch):
            raise HfsdkError(
                f"rank {rank} returned {describe_value(result)}; methods whose results are "
                "concatenated (dp_compute_proto, mesh_proto, pp_as_dp) must return a Batch"
            )
    out = results[0] if len(results) == 1 else Batch.concat(merge_rollout_metrics(results))
    if spec.pad:
        rows = trajectory_rows(out)
        if rows is not None and rows.count < len(out) and spec.pad <= rows.count:
            # Step-wise trajectories: a padding input row came back as all its segments.
            kept = int(rows.last[rows.count - spec.pad - 1]) + 1 if rows.count > spec.pad else 0
            return out.unpad(len(out) - kept)
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
    gradient norm) and for per-rank *shares* scaled by the rank count (the training
    engines report losses and per-token means as ``share × dp_size``, weighted
    by their valid tokens, so ranks with unequal valid tokens, padding rows
    included, average to the global value).
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for rank, result in zip(spec.ranks, results, strict=True):
        if not isinstance(result, Mapping):
            raise HfsdkError(
                f"dp_compute_metric: rank {rank} returned {describe_value(result)}; return a dict "
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
    member: BuiltinProtocol, dispatch: Dispatch, collect: Collect, layout: Layout, doc: str
) -> TransferProtocol:
    return TransferProtocol(
        name=member.value, dispatch=dispatch, collect=collect, layout=layout, doc=doc
    )


BUILTIN_PROTOCOLS: Mapping[str, TransferProtocol] = {
    p.name: p
    for p in (
        _builtin(
            BuiltinProtocol.ONE_TO_ALL,
            dispatch_one_to_all,
            collect_list,
            "list",
            "Same arguments to every rank; returns the list of per-rank results.",
        ),
        _builtin(
            BuiltinProtocol.ALL_TO_ALL,
            dispatch_all_to_all,
            collect_list,
            "list",
            "Each argument is a list with one item per rank; returns the per-rank results.",
        ),
        _builtin(
            BuiltinProtocol.RANK_ZERO,
            dispatch_rank_zero,
            collect_rank_zero,
            "concat",
            "Runs on rank 0 only; returns its result.",
        ),
        _builtin(
            BuiltinProtocol.DP_COMPUTE,
            dispatch_dp_compute,
            collect_concat_lists,
            "concat",
            "Splits list arguments into contiguous parts per rank; joins the list results.",
        ),
        _builtin(
            BuiltinProtocol.DP_COMPUTE_PROTO,
            dispatch_dp_compute_proto,
            collect_concat_batches,
            "concat",
            "Splits Batch arguments per rank (auto-padding); concatenates and unpads results.",
        ),
        _builtin(
            BuiltinProtocol.DP_COMPUTE_PROTO_WITH_FUNC,
            dispatch_dp_compute_proto_with_func,
            collect_concat_batches,
            "concat",
            "First argument (a function) to every rank, Batch arguments split; concatenates.",
        ),
        _builtin(
            BuiltinProtocol.DP_COMPUTE_METRIC,
            dispatch_dp_compute_train,
            collect_mean_metrics,
            "other",
            "Splits Batch arguments like dp_compute_proto, marking padding rows (meta "
            "dispatch_pad_rows) for training methods to ignore; averages the metric dicts.",
        ),
        _builtin(
            BuiltinProtocol.MESH_PROTO,
            dispatch_mesh_proto,
            collect_concat_batches,
            "concat",
            "Splits by the dp rank of a (pp, tp, dp) mesh; collects tp 0 of the last stage.",
        ),
    )
}
"""The built-in protocols by registry name (registered by ``hfsdk.core.builtin_plugin``)."""
