"""The micro-DP transition on 4 gloo processes: exact shards, counted bytes, bounded memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.hybrid_engine.accounting import transition_collectives
from hfsdk.core.hybrid_engine.layout import GenLayout, TrainLayout
from hfsdk_backend_common.testing.launch import run_gloo

HERE = str(Path(__file__).parent)


@pytest.fixture(scope="module")
def outcomes() -> list[dict]:
    return run_gloo(4, "reshard_worker:run_all", path=[HERE], timeout=300)


CASE_IDS = [
    (p, t, pg, tg, fmt)
    for p, t, pg, tg in [(1, 2, 1, 1), (2, 2, 1, 2), (1, 4, 1, 2), (2, 1, 1, 1), (2, 2, 2, 1)]
    for fmt in ("grouped", "stacked")
]


@pytest.mark.distributed
@pytest.mark.parametrize("case", CASE_IDS, ids=lambda c: "p{}t{}->pg{}tg{}-{}".format(*c))
def test_generation_shards_are_slices_of_the_full_weights(outcomes: list[dict], case) -> None:
    for rank, per_rank in enumerate(outcomes):
        outcome = per_rank[case]
        for attempt in outcome["results"]:
            assert attempt["names_ok"], (rank, case)
            assert attempt["mismatched"] == [], (rank, case)
        assert outcome["untouched"] and outcome["dropped"], (rank, case)


@pytest.mark.distributed
@pytest.mark.parametrize("case", CASE_IDS, ids=lambda c: "p{}t{}->pg{}tg{}-{}".format(*c))
def test_bytes_received_equal_the_micro_dp_formula(outcomes: list[dict], case) -> None:
    p, t, pg, tg, _ = case
    dg = p * t // (pg * tg)
    for rank, per_rank in enumerate(outcomes):
        outcome = per_rank[case]
        formula = outcome["formula"]
        for attempt in outcome["results"]:
            stats = attempt["stats"]
            assert stats.bytes_received == formula.received, (rank, case)
            assert stats.generation_bytes == formula.generation_shard
            assert stats.training_bytes == formula.training_shard
            # At least the minimum (gen - train shard); the excess is only the norm vectors.
            assert formula.minimum <= stats.bytes_received <= 1.05 * formula.minimum + 1
            if dg == 1:
                assert stats.bytes_received == 0 and stats.collectives == 0
            if case[4] == "grouped":
                train, gen = TrainLayout(p, t, 4 // (p * t)), GenLayout(pg, tg, dg)
                gen_stage = train.coords(rank)[0] // (p // pg)
                assert stats.collectives == transition_collectives(4, train, gen, gen_stage)
        # Members of one micro-DP group are the same training replica's ranks.
        assert len(outcome["group"]) == dg and rank in outcome["group"]


@pytest.mark.distributed
@pytest.mark.parametrize("case", CASE_IDS, ids=lambda c: "p{}t{}->pg{}tg{}-{}".format(*c))
def test_no_rank_holds_more_than_generation_plus_training_shard(outcomes: list[dict], case) -> None:
    for per_rank in outcomes:
        for attempt in per_rank[case]["results"]:
            stats = attempt["stats"]
            # Extra memory beyond the training shard never exceeds the generation shard.
            assert stats.peak_extra_bytes <= stats.generation_bytes
            if case[1] == case[3]:
                # t == tg: the own slice is the whole generation slice of a weight, so it is
                # used in place and only the other stages' weights are new memory.
                norms = 2 * 64 * 4 * 4  # at most the replicated norm vectors, float32
                assert (
                    stats.peak_extra_bytes <= stats.generation_bytes - stats.training_bytes + norms
                )
