"""Transfer protocols without Ray: which rank gets which rows, what collect returns.

Futures are built with stand-in object references; resolving a DataRef is
simulated by running its transform on the stand-in shards, so the row
arithmetic of handing a future to a group of another size is checked exactly.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk import Batch
from hfsdk.core.errors import HfsdkError, UnknownNameError
from hfsdk.core.plugin_manager import build_plugin_manager
from hfsdk.core.workers.futures import CallFuture, CollectSpec, DataRef
from hfsdk.core.workers.mesh import MeshPosition
from hfsdk.core.workers.protocols import (
    BUILTIN_PROTOCOLS,
    PAD_ROWS_META,
    DispatchContext,
    DispatchPlan,
    TransferProtocol,
    as_transfer_protocol,
    lookup_protocol,
    padding_rows,
    resolve_protocol,
    row_segments,
)


def ctx(
    protocol: str,
    world_size: int = 4,
    positions: list[MeshPosition] | None = None,
    **options: Any,
) -> DispatchContext:
    return DispatchContext(
        role="actor",
        method="m",
        protocol=protocol,
        world_size=world_size,
        options=options,
        mesh_lookup=(lambda name: tuple(positions)) if positions is not None else None,
    )


def rows(n: int) -> Batch:
    return Batch.from_dict({"x": torch.arange(n)}, {"tag": [f"s{i}" for i in range(n)]})


def plan_of(name: str, c: DispatchContext, *args: Any, **kwargs: Any) -> DispatchPlan:
    return BUILTIN_PROTOCOLS[name].dispatch(c, args, kwargs)


def run(plan: DispatchPlan, fn: Any) -> list[Any]:
    """Run ``fn`` per rank on the planned arguments; return the collected ranks' results."""
    results = {rank: fn(rank, *a, **k) for rank, (a, k) in plan.calls.items()}
    return [results[r] for r in plan.collect_spec().ranks]


def x_of(value: Any) -> list[int]:
    return value["x"].tolist()


# ---------------------------------------------------------------------- simple protocols


def test_one_to_all_sends_the_same_arguments_and_collects_a_list() -> None:
    plan = plan_of("one_to_all", ctx("one_to_all"), 5, flag=True)
    assert plan.calls == {r: ((5,), {"flag": True}) for r in range(4)}
    results = run(plan, lambda rank, v, flag: v * 10 + rank)
    assert BUILTIN_PROTOCOLS["one_to_all"].collect(results, plan.collect_spec()) == [50, 51, 52, 53]


def test_all_to_all_gives_rank_i_item_i_and_rejects_wrong_lengths() -> None:
    plan = plan_of("all_to_all", ctx("all_to_all"), [1, 2, 3, 4], scale=[10, 20, 30, 40])
    assert [plan.calls[r] for r in range(4)] == [
        ((1,), {"scale": 10}),
        ((2,), {"scale": 20}),
        ((3,), {"scale": 30}),
        ((4,), {"scale": 40}),
    ]
    with pytest.raises(HfsdkError, match=r"one item per rank \(4 items\), got a list of length 3"):
        plan_of("all_to_all", ctx("all_to_all"), [1, 2, 3])


def test_rank_zero_runs_only_rank_zero() -> None:
    plan = plan_of("rank_zero", ctx("rank_zero"), "a")
    assert list(plan.calls) == [0]
    assert BUILTIN_PROTOCOLS["rank_zero"].collect(["r0"], plan.collect_spec()) == "r0"


def test_dp_compute_splits_lists_contiguously_and_joins_results() -> None:
    words = [f"w{i}" for i in range(10)]
    plan = plan_of("dp_compute", ctx("dp_compute"), words, "!")
    parts = [plan.calls[r][0][0] for r in range(4)]
    assert parts == [words[0:3], words[3:6], words[6:8], words[8:10]]
    assert all(plan.calls[r][0][1] == "!" for r in range(4))  # non-lists are broadcast
    results = run(plan, lambda rank, ws, suffix: [w + suffix + str(rank) for w in ws])
    out = BUILTIN_PROTOCOLS["dp_compute"].collect(results, plan.collect_spec())
    assert out == [w + "!" + str(r) for r, part in enumerate(parts) for w in part]


def test_dp_compute_proto_pads_splits_and_unpads() -> None:
    plan = plan_of("dp_compute_proto", ctx("dp_compute_proto"), rows(10), temperature=0.5)
    assert plan.pad == 2
    assert [x_of(plan.calls[r][0][0]) for r in range(4)] == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
        [9, 0, 1],
    ]
    assert plan.calls[3][1] == {"temperature": 0.5}

    def work(rank: int, batch: Batch, temperature: float) -> Batch:
        return Batch.from_dict({"x": batch["x"], "rank": torch.full((len(batch),), rank)})

    out = BUILTIN_PROTOCOLS["dp_compute_proto"].collect(run(plan, work), plan.collect_spec())
    assert x_of(out) == list(range(10))
    assert out["rank"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]


def test_dp_compute_proto_rejects_missing_batches_and_unequal_lengths() -> None:
    with pytest.raises(HfsdkError, match="got no Batch argument"):
        plan_of("dp_compute_proto", ctx("dp_compute_proto"), 3)
    with pytest.raises(HfsdkError, match="different lengths"):
        plan_of("dp_compute_proto", ctx("dp_compute_proto"), rows(8), other=rows(6))


def test_dp_compute_proto_collect_names_a_rank_that_returned_no_batch() -> None:
    spec = CollectSpec(ranks=(0, 1))
    with pytest.raises(HfsdkError, match="rank 1 returned int"):
        BUILTIN_PROTOCOLS["dp_compute_proto"].collect([rows(2), 3], spec)


def test_with_func_broadcasts_the_function_and_splits_the_batch() -> None:
    plan = plan_of("dp_compute_proto_with_func", ctx("dp_compute_proto_with_func"), abs, rows(8))
    assert all(plan.calls[r][0][0] is abs for r in range(4))
    assert x_of(plan.calls[1][0][1]) == [2, 3]
    with pytest.raises(HfsdkError, match="first argument must be a function"):
        plan_of("dp_compute_proto_with_func", ctx("dp_compute_proto_with_func"), rows(8))


def test_dp_compute_metric_averages_every_value_of_every_rank() -> None:
    results = [{"loss": 1.0, "acc": [1, 0]}, {"loss": 3.0, "acc": [1, 1]}]
    out = BUILTIN_PROTOCOLS["dp_compute_metric"].collect(results, CollectSpec(ranks=(0, 1)))
    assert out == {"loss": 2.0, "acc": 0.75}
    with pytest.raises(HfsdkError, match="metric 'bad' is a str"):
        BUILTIN_PROTOCOLS["dp_compute_metric"].collect([{"bad": "x"}], CollectSpec(ranks=(0,)))


def test_dp_compute_metric_marks_each_pieces_padding_rows() -> None:
    # 1 row on 4 ranks: ranks 1-3 hold one repeat each; 10 on 4: rank 3 holds 2 of 3.
    for total, expected in ((1, [0, 1, 1, 1]), (10, [0, 0, 0, 2]), (8, [0, 0, 0, 0])):
        stale = rows(total)
        stale.meta[PAD_ROWS_META] = 5  # a leftover mark is replaced, never trusted
        plan = plan_of("dp_compute_metric", ctx("dp_compute_metric"), stale)
        assert [padding_rows(plan.calls[r][0][0]) for r in range(4)] == expected
    # Other protocols leave the batch unmarked.
    plan = plan_of("dp_compute_proto", ctx("dp_compute_proto"), rows(10))
    assert PAD_ROWS_META not in plan.calls[3][0][0].meta


def test_rows_in_groups_are_padded_and_split_by_whole_groups() -> None:
    """5 preference pairs on 4 ranks: every rank holds whole pairs, padding is whole pairs.

    Padding by rows gave 3/3/3/1 rows: pairs split across ranks, and each rank's engine
    refused its half pairs mid-run (an odd pair count after a max_length filter, say)."""
    pairs = rows(10)
    pairs.meta[hfsdk.ROW_GROUP] = 2
    plan = plan_of("dp_compute_metric", ctx("dp_compute_metric"), pairs)
    pieces = [plan.calls[r][0][0] for r in range(4)]
    assert [x_of(p) for p in pieces] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5]]
    assert [padding_rows(p) for p in pieces] == [0, 0, 2, 4] and plan.pad == 6
    plan = plan_of("dp_compute_proto", ctx("dp_compute_proto"), pairs)
    out = BUILTIN_PROTOCOLS["dp_compute_proto"].collect(
        run(plan, lambda rank, b: b), plan.collect_spec()
    )
    assert x_of(out) == list(range(10))  # the padding pairs are dropped again


def test_dp_compute_metric_marks_padding_of_pieces_assembled_from_futures() -> None:
    shards = [Batch.from_dict({"x": torch.tensor(v)}) for v in ([0, 1, 2], [3, 4, 5], [6, 7, 8])]
    # 9 rows split for 2 ranks: 5 + (4 real, 1 repeat); for 3 ranks (fast path): none.
    plan = plan_of("dp_compute_metric", ctx("dp_compute_metric", world_size=2), fake_future(shards))
    pieces = [resolve(plan.calls[r][0][0], shards) for r in range(2)]
    assert [x_of(p) for p in pieces] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 0]]
    assert [padding_rows(p) for p in pieces] == [0, 1]
    padded = [Batch.from_dict({"x": torch.tensor(v)}) for v in ([0, 1], [2, 0])]
    future = fake_future(padded, pad=1)
    plan = plan_of("dp_compute_metric", ctx("dp_compute_metric", world_size=2), future)
    assert [padding_rows(resolve(plan.calls[r][0][0], padded)) for r in range(2)] == [0, 1]


def test_padding_rows_rejects_a_count_beyond_the_batch() -> None:
    batch = rows(2)
    batch.meta[PAD_ROWS_META] = 3
    with pytest.raises(HfsdkError, match="trailing padding rows"):
        padding_rows(batch)


# ---------------------------------------------------------------------- mesh protocols


def mesh(pp: int, tp: int, dp: int) -> list[MeshPosition]:
    return [MeshPosition.from_rank(r, pp=pp, tp=tp, dp=dp) for r in range(pp * tp * dp)]


def test_mesh_proto_splits_by_dp_rank_and_collects_tp_zero() -> None:
    # 2 x 2 tp x dp: ranks 0,1 are dp 0 (tp 0, 1); ranks 2,3 are dp 1.
    c = ctx("mesh_proto", positions=mesh(1, 2, 2), mesh="train")
    plan = plan_of("mesh_proto", c, rows(5))
    assert plan.pad == 1
    assert [x_of(plan.calls[r][0][0]) for r in range(4)] == [
        [0, 1, 2],
        [0, 1, 2],
        [3, 4, 0],
        [3, 4, 0],
    ]
    assert plan.collect_spec().ranks == (0, 2)
    out = BUILTIN_PROTOCOLS["mesh_proto"].collect(run(plan, lambda rank, b: b), plan.collect_spec())
    assert x_of(out) == [0, 1, 2, 3, 4]


def test_mesh_proto_collects_from_the_last_pipeline_stage() -> None:
    plan = plan_of("mesh_proto", ctx("mesh_proto", positions=mesh(2, 2, 1), mesh="pipe"), rows(4))
    assert all(x_of(plan.calls[r][0][0]) == [0, 1, 2, 3] for r in range(4))
    assert plan.collect_spec().ranks == (2,)  # pp rank 1, tp rank 0


def test_mesh_protocols_need_a_mesh_name_and_a_consistent_mesh() -> None:
    with pytest.raises(HfsdkError, match="needs the name of a mesh"):
        plan_of("mesh_proto", ctx("mesh_proto", positions=mesh(1, 2, 2)), rows(4))
    broken = [*mesh(1, 2, 2)[:3], MeshPosition(dp_rank=0, dp_size=4)]
    with pytest.raises(HfsdkError, match="different mesh shapes"):
        plan_of("mesh_proto", ctx("mesh_proto", positions=broken, mesh="m"), rows(4))


# ---------------------------------------------------------------------- futures as arguments


def fake_future(shards: list[Any], protocol: str = "dp_compute_proto", pad: int = 0) -> CallFuture:
    """A finished future whose 'object refs' are keys into ``shards``."""
    n = len(shards)
    future = CallFuture(
        role="producer",
        method="make",
        protocol=BUILTIN_PROTOCOLS[protocol],
        spec=CollectSpec(ranks=tuple(range(n)), pad=pad),
        result_refs={r: ("result", r) for r in range(n)},
        info_refs={r: ("info", r) for r in range(n)},
    )
    future._infos = {r: (True, len(shards[r]), None) for r in range(n)}
    return future


def resolve(ref: DataRef, shards: list[Any]) -> Any:
    assert all(kind == "result" for kind, _ in ref.result_refs)
    return ref.transform([shards[r] for _, r in ref.result_refs])


def test_future_with_as_many_shards_as_ranks_is_handed_over_shard_by_shard() -> None:
    shards = [rows(3), rows(3)]
    future = fake_future(shards, pad=1)
    future._infos = None  # the fast path must not wait for the producer
    plan = plan_of("dp_compute_proto", ctx("dp_compute_proto", world_size=2), future)
    assert plan.pad == 1
    refs = [plan.calls[r][0][0] for r in range(2)]
    assert [ref.result_refs for ref in refs] == [(("result", 0),), (("result", 1),)]


def test_future_split_for_another_group_size_takes_exactly_the_padded_rows() -> None:
    # Producer: 10 rows on 4 ranks (padded to 12, two padding rows marked -1).
    shards = [
        Batch.from_dict({"x": torch.tensor(v)})
        for v in ([0, 1, 2], [3, 4, 5], [6, 7, 8], [9, -1, -1])
    ]
    future = fake_future(shards, pad=2)
    plan = plan_of("dp_compute_proto", ctx("dp_compute_proto", world_size=3), future)
    assert plan.pad == 2  # 10 rows on 3 ranks
    got = [x_of(resolve(plan.calls[r][0][0], shards)) for r in range(3)]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]


def test_future_whole_value_is_collected_by_the_receiving_worker() -> None:
    shards = [[1, 2], [3]]
    future = fake_future(shards, protocol="dp_compute")
    plan = plan_of("one_to_all", ctx("one_to_all", world_size=2), future)
    assert [resolve(plan.calls[r][0][0], shards) for r in range(2)] == [[1, 2, 3], [1, 2, 3]]


def test_per_rank_future_goes_item_by_item_to_all_to_all() -> None:
    future = fake_future([["a"], ["b"]], protocol="one_to_all")
    plan = plan_of("all_to_all", ctx("all_to_all", world_size=2), future)
    assert [plan.calls[r][0][0].result_refs for r in range(2)] == [
        (("result", 0),),
        (("result", 1),),
    ]


@settings(max_examples=60, deadline=None)
@given(
    total=st.integers(1, 23),
    source_parts=st.integers(1, 5),
    parts=st.integers(1, 6),
    data=st.data(),
)
def test_row_segments_match_pad_to_divisor_then_chunk(
    total: int, source_parts: int, parts: int, data: st.DataObject
) -> None:
    # Any split of the producer's rows (plus its own padding at the end) ...
    source_pad = -total % source_parts
    cuts = sorted(
        data.draw(
            st.lists(
                st.integers(0, total + source_pad),
                min_size=source_parts - 1,
                max_size=source_parts - 1,
            )
        )
    )
    flat = list(range(total)) + [-1] * source_pad
    bounds = [0, *cuts, total + source_pad]
    shards = [flat[a:b] for a, b in itertools.pairwise(bounds)]
    # ... cut for ``parts`` ranks equals padding the logical value and chunking it.
    padded, pad = Batch.from_dict({"x": torch.arange(total)}).pad_to_divisor(parts)
    size = (total + pad) // parts
    expected = [padded["x"].tolist()[j * size : (j + 1) * size] for j in range(parts)]
    got = []
    for j in range(parts):
        segments = row_segments(j * size, (j + 1) * size, total, [len(s) for s in shards])
        got.append([x for i, a, b in segments for x in shards[i][a:b]])
    assert got == expected


# ---------------------------------------------------------------------- registry


def _odd_dispatch(c: DispatchContext, args: tuple, kwargs: dict) -> DispatchPlan:
    return DispatchPlan(calls={r: (args, kwargs) for r in range(1, c.world_size, 2)})


def _sum_collect(results: list, spec: CollectSpec) -> int:
    return sum(results)


class _ProtocolPlugin:
    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_transfer_protocols(register: Any) -> None:
        register("odd_sum", (_odd_dispatch, _sum_collect))


def test_plugins_add_protocols_next_to_the_builtins() -> None:
    pm = build_plugin_manager([("oddplug", _ProtocolPlugin)], load_entry_points=False)
    registry = pm.registry("transfer_protocols")
    assert set(BUILTIN_PROTOCOLS) < set(registry)
    assert registry["odd_sum"].plugin == "oddplug"
    assert registry["dp_compute_proto"].plugin == "hfsdk"
    protocol = as_transfer_protocol("odd_sum", registry["odd_sum"].impl)
    plan = protocol.dispatch(ctx("odd_sum"), (2,), {})
    assert sorted(plan.calls) == [1, 3]
    assert protocol.collect([5, 7], plan.collect_spec()) == 12


def test_lookup_accepts_enum_members_and_upper_case_names() -> None:
    assert resolve_protocol(hfsdk.BuiltinProtocol.MESH_PROTO) is BUILTIN_PROTOCOLS["mesh_proto"]
    assert lookup_protocol("DP_COMPUTE") is BUILTIN_PROTOCOLS["dp_compute"]
    custom = TransferProtocol(name="mine", dispatch=_odd_dispatch, collect=_sum_collect)
    assert resolve_protocol(custom) is custom


def test_unknown_protocol_names_list_the_available_ones() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'dp_compute_proto'"):
        lookup_protocol("dp_compute_prot")


def test_bad_registrations_are_explained() -> None:
    with pytest.raises(HfsdkError, match="expected a TransferProtocol or a"):
        as_transfer_protocol("x", 42)
