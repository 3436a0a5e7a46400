"""Which groups dynamic sampling keeps, and which rows belong to them."""

from __future__ import annotations

from hfsdk_dapo.dynamic_sampling import informative_groups, rows_of


def test_groups_whose_samples_all_agree_are_dropped() -> None:
    ids = ["a", "a", "b", "b", "c", "c"]
    scores = [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    assert informative_groups(ids, scores) == ["b"]


def test_near_equal_floats_count_as_equal_and_order_is_first_seen() -> None:
    ids = [2, 1, 2, 1]
    scores = [0.1 + 0.2, 0.5, 0.3, 0.0]  # 0.30000000000000004 vs 0.3: one value
    assert informative_groups(ids, scores) == [1]


def test_rows_follow_the_order_of_the_kept_groups() -> None:
    ids = ["x", "y", "x", "z", "y"]
    assert rows_of(ids, ["y", "x"]) == [1, 4, 0, 2]
