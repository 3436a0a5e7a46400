"""Future helpers without Ray: data-reference pickling, row assembly, death causes."""

from __future__ import annotations

import functools
import pickle

import torch

from hfsdk import Batch
from hfsdk.core.workers.futures import (
    CollectSpec,
    DataRef,
    apply_collect,
    death_cause,
    take_segments,
    take_single,
)
from hfsdk.core.workers.protocols import collect_concat_batches

RAY_DEATH = (
    "The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: WorkerHost\n"
    "\tpid: 123\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of "
    "file. Some common causes include: (1) the process was killed by the OOM killer"
)


def test_death_cause_keeps_exit_type_and_detail_only() -> None:
    cause = death_cause(RuntimeError(RAY_DEATH))
    assert cause.startswith("The actor is dead because its worker process has died.")
    assert "Worker exit type: SYSTEM_ERROR" in cause
    assert cause.endswith("End of file.")
    assert death_cause(RuntimeError("something else\nsecond\nthird")) == "something else\nsecond"


def test_take_segments_assembles_rows_of_batches_and_lists() -> None:
    shards = [
        Batch.from_dict({"x": torch.arange(0, 3)}),
        Batch.from_dict({"x": torch.arange(3, 6)}),
    ]
    out = take_segments([(1, 1, 3), (0, 0, 2)], shards)
    assert out["x"].tolist() == [4, 5, 0, 1]
    assert take_segments([(0, 2, 3), (1, 0, 1)], [["a", "b", "c"], ["d"]]) == ["c", "d"]
    assert len(take_segments([(0, 0, 0)], shards)) == 0


def test_data_refs_pickle_with_their_transform() -> None:
    spec = CollectSpec(ranks=(0, 1), pad=1)
    ref = DataRef(
        result_refs=["r0", "r1"],
        info_refs=["i0", "i1"],
        source="actor.generate",
        transform=functools.partial(apply_collect, collect_concat_batches, spec),
    )
    copy = pickle.loads(pickle.dumps(ref))
    assert (copy.result_refs, copy.info_refs, copy.source) == (
        ("r0", "r1"),
        ("i0", "i1"),
        "actor.generate",
    )
    shards = [
        Batch.from_dict({"x": torch.tensor([0, 1])}),
        Batch.from_dict({"x": torch.tensor([2, 0])}),
    ]
    assert copy.transform(shards)["x"].tolist() == [0, 1, 2]  # padding row removed
    assert take_single(["only"]) == "only"
