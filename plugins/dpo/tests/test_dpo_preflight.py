"""DPO's preflight: how many over-long pairs it refuses (enough of them could fill a step,
whose pairs would all be dropped, and the run would stop mid-way)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hfsdk_dpo.preflight import _long_pairs_that_could_fill_a_step


@pytest.mark.parametrize(
    ("batch_size", "rows", "expected"),
    [
        (1, 8, 1),  # a step of one pair: any long pair fills it (before: not refused)
        (8, 100, 4),  # a step straddling two epochs may draw a long row twice
        (9, 100, 5),
        (8, 3, 3),  # fewer rows than a step: a step holds all of them
    ],
)
def test_long_pairs_that_could_fill_a_step(batch_size: int, rows: int, expected: int) -> None:
    prepared = SimpleNamespace(loader=SimpleNamespace(rows=[{}] * rows))
    assert _long_pairs_that_could_fill_a_step(batch_size, prepared) == expected
