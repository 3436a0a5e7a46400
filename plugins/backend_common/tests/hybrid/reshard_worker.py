"""Rank-side checks of the micro-DP transition (run by ``launch.run_gloo`` from the tests)."""

from __future__ import annotations

from typing import Any

import torch

from hfsdk_backend_common.hybrid.accounting import generation_specs, transition_bytes
from hfsdk_backend_common.hybrid.groups import create_groups
from hfsdk_backend_common.hybrid.layout import HeadShape, TrainLayout, generation_layout, validate
from hfsdk_backend_common.hybrid.llama_format import LlamaShape, llama_specs, tp_slice
from hfsdk_backend_common.hybrid.reshard import HybridEngine
from hfsdk_backend_common.testing.synthetic import full_weight, synthetic_shard

SHAPE = LlamaShape(
    vocab_size=96, hidden_size=64, intermediate_size=80, num_layers=4, num_heads=8, num_kv_heads=4
)


def check_case(
    rank: int, world: int, p: int, t: int, pg: int, tg: int, qkv_format: str
) -> dict[str, Any]:
    """Reshard a synthetic model (p, t) -> (pg, tg) and compare with slices of the full weights."""
    train = TrainLayout(p, t, world // (p * t))
    gen = generation_layout(train, tp=tg, pp=pg)
    validate(train, gen, HeadShape(num_layers=4, num_heads=8, num_kv_heads=4))
    specs = llama_specs(SHAPE, qkv_format=qkv_format)
    groups = create_groups(train, gen)
    engine = HybridEngine(
        train=train, gen=gen, specs=specs, num_layers=4, rank=rank, micro_dp=groups.micro_dp,
        lend_training=True,
    )  # fmt: skip
    i, j, _ = train.coords(rank)
    shard = synthetic_shard(specs, p=p, t=t, stage=i, tp=j, num_layers=4, seed=7)
    before = {k: v.clone() for k, v in shard.items()}
    results = []
    for _round in range(2):  # train -> generate -> train -> generate: nothing accumulates
        gen_shard = engine.to_generation(shard)
        # Lent training tensors really gave their memory back while generating.
        released = sum(
            t.numel() * t.element_size() for t in shard.values() if not t.untyped_storage().nbytes()
        )
        expected = generation_specs(specs, train, gen, engine.place.gen_stage, 4)
        mismatched = [
            s.name
            for s in expected
            if not torch.equal(
                gen_shard[s.name], tp_slice(full_weight(s, 7), s, tg, j // (t // tg))
            )
        ]
        # What this rank lacks, from the tensors themselves: its generation shard (the
        # right slices, checked above) minus its training shard.
        lacking = sum(t.numel() * t.element_size() for t in gen_shard.values()) - sum(
            t.numel() * t.element_size() for t in shard.values()
        )
        results.append(
            {
                "names_ok": sorted(gen_shard) == sorted(s.name for s in expected),
                "mismatched": mismatched,
                "stats": engine.stats,
                "lacking": lacking,
                "released": released,
                "largest_training": max(t.numel() * t.element_size() for t in shard.values()),
            }
        )
        engine.to_training()
    formula = transition_bytes(specs, train, gen, rank, 4, element_size=4)
    untouched = all(torch.equal(before[k], shard[k]) for k in shard)
    return {
        "results": results,
        "formula": formula,
        "untouched": untouched,
        "dropped": not engine.shard,
        "group": engine.place.group,
    }


CASES = [(1, 2, 1, 1), (2, 2, 1, 2), (1, 4, 1, 2), (2, 1, 1, 1), (2, 2, 2, 1), (2, 2, 1, 1)]


def run_all(rank: int, world: int) -> dict[tuple, dict[str, Any]]:
    """Every case in both QKV formats on the same world (d = world / (p*t))."""
    out = {}
    for p, t, pg, tg in CASES:
        for qkv_format in ("grouped", "stacked"):
            out[(p, t, pg, tg, qkv_format)] = check_case(rank, world, p, t, pg, tg, qkv_format)
    return out


def check_dropped_piece(rank: int, world: int) -> dict[str, Any]:
    """``reshard_drop:2``: the first transition verifies, the second loses a piece on every
    receiving member and raises on every rank (none is left waiting in a collective)."""
    import os

    from hfsdk_backend_common import WeightSyncMismatch
    from hfsdk_faults import faults

    os.environ[faults.FAULT_ENV] = "reshard_drop:2"
    faults._FIRED.clear()
    train = TrainLayout(1, 2, world // 2)
    gen = generation_layout(train, tp=1, pp=1)  # t=2 -> tg=1: each rank receives a half
    specs = llama_specs(SHAPE, qkv_format="grouped")
    groups = create_groups(train, gen)
    engine = HybridEngine(
        train=train, gen=gen, specs=specs, num_layers=4, rank=rank, micro_dp=groups.micro_dp
    )
    _, j, _ = train.coords(rank)
    shard = synthetic_shard(specs, p=1, t=2, stage=0, tp=j, num_layers=4, seed=7)
    engine.to_generation(shard)
    first = engine.stats.metrics()
    engine.to_training()
    try:
        engine.to_generation(shard)
        error = None
    except WeightSyncMismatch as exc:
        error = str(exc)
    engine.to_training()
    return {"first": first, "verified": engine.stats.verified, "error": error}
