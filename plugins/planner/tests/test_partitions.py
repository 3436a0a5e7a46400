"""Colocation partitions and device allocations are enumerated exactly once each."""

from __future__ import annotations

import itertools
import math

import pytest

from hfsdk import Dataflow, Stage
from hfsdk_planner import Workload, get_cluster, search_placement
from hfsdk_planner.partitions import allocations, bell_number, set_partitions


def _canonical(partition: tuple[tuple[str, ...], ...]) -> frozenset[frozenset[str]]:
    return frozenset(frozenset(group) for group in partition)


@pytest.mark.parametrize("n", range(0, 8))
def test_every_partition_exactly_once(n: int) -> None:
    items = [f"r{i}" for i in range(n)]
    found = list(set_partitions(items))
    assert len(found) == bell_number(n)
    assert len({_canonical(p) for p in found}) == len(found)  # no duplicates
    for partition in found:
        flat = [item for group in partition for item in group]
        assert sorted(flat) == sorted(items)  # each item in exactly one group
        assert all(group for group in partition)
        firsts = [items.index(group[0]) for group in partition]
        assert firsts == sorted(firsts)  # groups ordered by first item


def test_bell_numbers_match_the_papers_counts() -> None:
    # Four roles (PPO) give 15 placements, five (the paper's Safe-RLHF) 52.
    assert len(list(set_partitions("abcd"))) == 15
    assert len(list(set_partitions("abcde"))) == 52
    assert [bell_number(n) for n in range(7)] == [1, 1, 2, 5, 15, 52, 203]


def test_partitions_start_with_everything_colocated_and_end_separate() -> None:
    found = list(set_partitions(["actor", "critic", "ref"]))
    assert found[0] == (("actor", "critic", "ref"),)
    assert found[-1] == (("actor",), ("critic",), ("ref",))


def test_brute_force_partition_count_by_labelling() -> None:
    # Independent count: label assignments up to renaming the labels.
    items = "abcde"
    seen = set()
    for labels in itertools.product(range(len(items)), repeat=len(items)):
        groups: dict[int, set[str]] = {}
        for item, label in zip(items, labels, strict=True):
            groups.setdefault(label, set()).add(item)
        seen.add(frozenset(frozenset(g) for g in groups.values()))
    assert len(seen) == len(list(set_partitions(items)))


@pytest.mark.parametrize(
    ("total", "minimums"), [(10, (1, 1, 1)), (12, (2, 5, 1)), (7, (3, 4)), (9, (4,)), (5, (3, 3))]
)
def test_allocations_exactly_once(total: int, minimums: tuple[int, ...]) -> None:
    found = list(allocations(total, minimums))
    spare = total - sum(minimums)
    k = len(minimums)
    expected = math.comb(spare + k - 1, k - 1) if spare >= 0 else 0
    assert len(found) == expected
    assert len(set(found)) == len(found)
    assert found == sorted(found)  # lexicographic
    for alloc in found:
        assert sum(alloc) == total
        assert all(a >= m for a, m in zip(alloc, minimums, strict=True))


def _dataflow(roles: tuple[str, ...]) -> Dataflow:
    return Dataflow(
        roles=roles,
        stages=(
            Stage(name="generation", work=((roles[0], "generation"),)),
            Stage(name="preparation", work=tuple((r, "inference") for r in roles)),
            Stage(name="training", work=((roles[0], "training"), (roles[1], "training"))),
        ),
    )


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        (("actor", "critic", "reference", "reward"), 15),
        (("actor", "critic", "reference", "reward", "cost"), 52),
    ],
)
def test_search_considers_every_partition(roles: tuple[str, ...], expected: int) -> None:
    plan = search_placement(
        _dataflow(roles),
        "1.3B",
        get_cluster("a100-80gb").with_devices(8),
        Workload(batch_size=64),
    )
    assert plan.stats is not None
    assert plan.stats.partitions == expected
    assert 1 <= plan.stats.feasible_partitions <= expected
