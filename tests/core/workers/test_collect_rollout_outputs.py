"""Collecting several data-parallel ranks' rollout outputs in one process.

Each rank measures its own rollout metrics (its generation time, its bytes
received), so ``meta['rollout_metrics']`` differs between ranks; before the fix
that made ``Batch.concat`` refuse the outputs, and only a two-device run showed
it. The protocols' collect (and a future handed to a group of another size)
now reduces them to each metric's row-weighted mean; any other meta still has
to agree.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hfsdk import Batch, HfsdkError, assemble_rollout
from hfsdk.core.workers.futures import CallFuture, CollectSpec
from hfsdk.core.workers.protocols import BUILTIN_PROTOCOLS, DispatchContext


class _Tokenizer:
    pad_token_id = 0
    eos_token_id = 2

    def batch_decode(self, rows: list[list[int]], skip_special_tokens: bool) -> list[str]:
        return [str(row) for row in rows]


def _prompts(rows: int) -> Batch:
    ids = torch.arange(1, 2 * rows + 1).view(rows, 2) + 10
    return Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        non_tensors={"uid": [f"p{i}" for i in range(rows)]},
        meta={"n": 1, "greedy": False},
    )


def _rank_output(prompts: Batch, rank: int, **meta: Any) -> Batch:
    """A rank's rollout output, with metrics only this rank measured."""
    responses = prompts["input_ids"][:, :1].repeat(1, 3) + 100
    out = assemble_rollout(
        prompts, responses, tokenizer=_Tokenizer(), eos_ids=[2], temperature=1.0, greedy=False,
        metrics={"timing/generate_s": 1.0 + rank, "perf/reshard_bytes": 100.0 * (rank + 1)},
    )  # fmt: skip
    out.meta.update(meta)
    return out


def _dispatch(protocol: str, batch: Batch, world: int) -> Any:
    ctx = DispatchContext(
        role="actor", method="generate_sequences", protocol=protocol, world_size=world, options={}
    )
    return BUILTIN_PROTOCOLS[protocol].dispatch(ctx, (batch,), {})


@pytest.mark.parametrize("protocol", ["dp_compute_proto", "dp_compute_proto_with_func"])
def test_two_ranks_rollout_outputs_are_collected_with_merged_metrics(protocol: str) -> None:
    prompts = _prompts(5)
    args: tuple[Any, ...] = (prompts,) if protocol == "dp_compute_proto" else (len, prompts)
    ctx = DispatchContext(role="actor", method="m", protocol=protocol, world_size=2, options={})
    plan = BUILTIN_PROTOCOLS[protocol].dispatch(ctx, args, {})
    pieces = [plan.calls[rank][0][-1] for rank in range(2)]
    outputs = [_rank_output(piece, rank) for rank, piece in enumerate(pieces)]
    with pytest.raises(HfsdkError, match="meta key 'rollout_metrics' differs"):
        Batch.concat(outputs)  # what a plain concatenation does

    out = BUILTIN_PROTOCOLS[protocol].collect(outputs, plan.collect_spec())
    assert list(out["uid"]) == [f"p{i}" for i in range(5)]  # the padding row is gone
    assert torch.equal(out["prompts"], prompts["input_ids"])
    # 3 rows each (5 padded to 6): the plain mean of the two ranks
    assert out.meta["rollout_metrics"] == {"perf/reshard_bytes": 150.0, "timing/generate_s": 1.5}
    assert out.meta["n"] == 1 and out.meta["temperature"] == 1.0


def test_other_meta_must_still_agree() -> None:
    plan = _dispatch("dp_compute_proto", _prompts(4), 2)
    outputs = [_rank_output(plan.calls[r][0][0], r, temperature=0.5 + r) for r in range(2)]
    with pytest.raises(HfsdkError, match="meta key 'temperature' differs"):
        BUILTIN_PROTOCOLS["dp_compute_proto"].collect(outputs, plan.collect_spec())


def test_a_future_of_rollout_outputs_is_split_for_another_group_size() -> None:
    """Four ranks' outputs (10 rows, 2 of them padding) fetched by a group of three:
    each worker concatenates pieces of several ranks, weighting their metrics by rows."""
    prompts = _prompts(10)
    plan = _dispatch("dp_compute_proto", prompts, 4)
    shards = [_rank_output(plan.calls[r][0][0], r) for r in range(4)]
    future = CallFuture(
        role="actor",
        method="generate_sequences",
        protocol=BUILTIN_PROTOCOLS["dp_compute_proto"],
        spec=CollectSpec(ranks=(0, 1, 2, 3), pad=plan.pad),
        result_refs={r: ("result", r) for r in range(4)},
        info_refs={r: ("info", r) for r in range(4)},
    )
    future._infos = {r: (True, len(shards[r]), None) for r in range(4)}
    receiving = _dispatch("dp_compute_proto", future, 3)  # type: ignore[arg-type]
    got = []
    for rank in range(3):
        ref = receiving.calls[rank][0][0]
        got.append(ref.transform([shards[r] for _, r in ref.result_refs]))
    assert [list(g["uid"]) for g in got] == [
        ["p0", "p1", "p2", "p3"], ["p4", "p5", "p6", "p7"], ["p8", "p9", "p0", "p1"],
    ]  # fmt: skip
    # worker 0 holds 3 rows of rank 0 and 1 of rank 1: (3 * 1 + 1 * 2) / 4 seconds
    assert got[0].meta["rollout_metrics"]["timing/generate_s"] == pytest.approx(1.25)
