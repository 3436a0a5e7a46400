"""The micro-DP transition on 4 gloo processes: exact shards, counted bytes, bounded memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk_backend_common.hybrid.accounting import transition_collectives
from hfsdk_backend_common.hybrid.layout import GenLayout, TrainLayout
from hfsdk_backend_common.testing.launch import run_gloo

HERE = str(Path(__file__).parent)


@pytest.fixture(scope="module")
def outcomes() -> list[dict]:
    return run_gloo(4, "reshard_worker:run_all", path=[HERE], timeout=300)


CASE_IDS = [
    (p, t, pg, tg, fmt)
    for p, t, pg, tg in [
        (1, 2, 1, 1),
        (2, 2, 1, 2),
        (1, 4, 1, 2),
        (2, 1, 1, 1),
        (2, 2, 2, 1),
        (2, 2, 1, 1),
    ]
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


# Communication calls per rank of the 4-layer model, grouped QKV, counted by hand: per layer
# 5 parts x b broadcasts (b = t/tg; 4 weights when b = 1), the norms only when a = p/pg > 1
# (2 per layer broadcast when b = 1; 4(a-1) per own layer sent/received when b > 1),
# embedding and output b each, the final norm once when a > 1. Norms are never sent when
# every member holds them.
HAND_COUNTED_CALLS = {
    (1, 2, 1, 1): 4 * 10 + 2 + 2,
    (2, 2, 1, 2): 4 * 4 + 4 * 2 + 1 + 1 + 1,
    (1, 4, 1, 2): 4 * 10 + 2 + 2,
    (2, 1, 1, 1): 4 * 4 + 4 * 2 + 1 + 1 + 1,
    (2, 2, 2, 1): 2 * 10 + 2,
    (2, 2, 1, 1): 4 * 10 + 4 * 2 + 2 + 2 + 1,
}


@pytest.mark.distributed
@pytest.mark.parametrize("case", CASE_IDS, ids=lambda c: "p{}t{}->pg{}tg{}-{}".format(*c))
def test_bytes_received_are_exactly_what_each_rank_lacks(outcomes: list[dict], case) -> None:
    p, t, pg, tg, _ = case
    dg = p * t // (pg * tg)
    for rank, per_rank in enumerate(outcomes):
        outcome = per_rank[case]
        formula = outcome["formula"]
        for attempt in outcome["results"]:
            stats = attempt["stats"]
            # The minimum, measured from the tensors (generation minus training shard), and
            # the layout formula of what the rank lacks: no norm is received twice.
            assert stats.bytes_received == attempt["lacking"] == formula.minimum, (rank, case)
            assert formula.received == formula.minimum
            assert stats.generation_bytes == formula.generation_shard
            assert stats.training_bytes == formula.training_shard
            if dg == 1:
                assert stats.bytes_received == 0 and stats.collectives == 0
            if case[4] == "grouped":
                train, gen = TrainLayout(p, t, 4 // (p * t)), GenLayout(pg, tg, dg)
                stage = train.coords(rank)[0]
                gen_stage = stage // (p // pg)
                assert stats.collectives == HAND_COUNTED_CALLS[case[:4]], (rank, case)
                assert stats.collectives == transition_collectives(4, train, gen, gen_stage, stage)
        # Members of one micro-DP group are the same training replica's ranks.
        assert len(outcome["group"]) == dg and rank in outcome["group"]


@pytest.mark.distributed
@pytest.mark.parametrize("case", CASE_IDS, ids=lambda c: "p{}t{}->pg{}tg{}-{}".format(*c))
def test_no_rank_holds_more_than_generation_plus_training_shard(outcomes: list[dict], case) -> None:
    t, tg = case[1], case[3]
    norms = 2 * 64 * 4 * 4  # at most the replicated norm vectors, float32
    for per_rank in outcomes:
        for attempt in per_rank[case]["results"]:
            stats = attempt["stats"]
            gen, train = stats.generation_bytes, stats.training_bytes
            # Extra memory beyond the training shard never exceeds the generation shard.
            assert stats.peak_extra_bytes <= gen
            # Zero redundancy while generating: the own slices live only in the generation
            # tensors (t == tg: the training tensors are used in place; tg < t: lent).
            assert stats.held_extra_bytes == gen - train, case
            if t == tg:
                assert stats.peak_extra_bytes <= gen - train + norms
            else:
                assert attempt["released"] > 0.9 * train  # every tensor-split weight lent
                # A weight's training slice is held until it is copied: one weight above.
                assert stats.peak_extra_bytes <= gen - train + attempt["largest_training"]


@pytest.mark.distributed
def test_every_transition_is_verified_and_a_lost_piece_stops_every_rank() -> None:
    ranks = run_gloo(4, "reshard_worker:check_dropped_piece", path=[HERE], timeout=300)
    for outcome in ranks:
        assert outcome["first"]["sync/verified"] == 1.0
        assert outcome["verified"] > 0  # pieces were received and checked
        error = outcome["error"]
        assert error is not None and "\n" not in error
        assert error.startswith("3D-HybridEngine transition 2 (")
        assert "piece(s) that differ from what was sent (first: " in error
