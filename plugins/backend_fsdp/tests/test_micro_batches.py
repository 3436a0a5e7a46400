"""Token-budget micro-batches: grouping rows so rows x longest row stays within a budget."""

from __future__ import annotations

import pytest

from hfsdk_backend_fsdp.micro_batches import padded_cost, token_budget_groups

LENGTHS = [10, 3, 9, 2, 4, 10, 3]


def _rows(groups: list[list[int]]) -> list[int]:
    return sorted(r for g in groups for r in g)


def test_consecutive_groups_keep_the_order_and_the_budget() -> None:
    groups = token_budget_groups(LENGTHS, 20)
    assert [r for g in groups for r in g] == list(range(len(LENGTHS)))
    assert all(padded_cost(LENGTHS, g) <= 20 for g in groups)
    assert groups == [[0, 1], [2, 3], [4, 5], [6]]


def test_grouping_by_length_wastes_less_padding() -> None:
    consecutive = token_budget_groups(LENGTHS, 20)
    by_length = token_budget_groups(LENGTHS, 20, by_length=True)
    assert _rows(by_length) == list(range(len(LENGTHS)))
    assert all(padded_cost(LENGTHS, g) <= 20 for g in by_length)
    assert len(by_length) < len(consecutive)  # the short rows share passes
    total = sum(padded_cost(LENGTHS, g) for g in by_length)
    assert total < sum(padded_cost(LENGTHS, g) for g in consecutive)
    assert by_length == [[0, 5], [2, 4], [1, 6, 3]]


def test_a_row_over_the_budget_gets_its_own_pass() -> None:
    assert token_budget_groups([50, 2, 2], 10) == [[0], [1, 2]]


def test_an_agreed_count_splits_the_costliest_passes() -> None:
    groups = token_budget_groups(LENGTHS, 100, count=3, by_length=True)
    assert len(groups) == 3 and all(groups)
    assert _rows(groups) == list(range(len(LENGTHS)))
    assert token_budget_groups([1, 1, 1], 100, count=3) == [[0], [1], [2]]


def test_impossible_counts_and_budgets_are_refused() -> None:
    with pytest.raises(ValueError, match="cannot split 3 rows into 4"):
        token_budget_groups([1, 1, 1], 100, count=4)
    with pytest.raises(ValueError, match="needs 3"):
        token_budget_groups([5, 5, 5], 5, count=2)
    with pytest.raises(ValueError, match="budget must be >= 1"):
        token_budget_groups([5], 0)
