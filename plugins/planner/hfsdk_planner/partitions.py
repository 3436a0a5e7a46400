"""Colocation partitions of roles and device allocations over groups.

Partitions are generated as restricted growth strings: element i goes to an
existing group or opens the next one, so every partition of the set appears
exactly once (Bell(n) of them: 15 for four roles, 52 for five, 203 for six)
and the order is deterministic, starting with everything in one group.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def set_partitions(items: Sequence[T]) -> Iterator[tuple[tuple[T, ...], ...]]:
    """Every partition of ``items`` into non-empty groups, each exactly once.

    Groups keep the items' order and are ordered by their first item, so the
    group holding ``items[0]`` always comes first.
    """
    items = tuple(items)
    if not items:
        yield ()  # the empty set has exactly one partition, with no groups
        return
    labels = [0] * len(items)

    def emit() -> tuple[tuple[T, ...], ...]:
        groups: list[list[T]] = [[] for _ in range(max(labels) + 1)]
        for item, label in zip(items, labels, strict=True):
            groups[label].append(item)
        return tuple(tuple(group) for group in groups)

    def extend(index: int, used: int) -> Iterator[tuple[tuple[T, ...], ...]]:
        if index == len(items):
            yield emit()
            return
        # Join one of the ``used`` open groups, or open a new one.
        for label in range(used + 1):
            labels[index] = label
            yield from extend(index + 1, max(used, label + 1))

    labels[0] = 0
    yield from extend(1, 1)


def bell_number(n: int) -> int:
    """How many partitions a set of ``n`` items has (Bell triangle)."""
    if n < 0:
        raise ValueError(f"bell_number needs n >= 0, got {n}")
    row = [1]
    for _ in range(n):
        nxt = [row[-1]]
        for value in row:
            nxt.append(nxt[-1] + value)
        row = nxt
    return row[0]


def allocations(total: int, minimums: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every way to give ``total`` devices to groups, group i getting at least ``minimums[i]``.

    Lexicographic order (the first group's count ascending first).
    """
    minimums = tuple(minimums)
    if not minimums:
        return
    rest = [sum(minimums[i + 1 :]) for i in range(len(minimums))]

    def extend(index: int, left: int, prefix: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
        if index == len(minimums) - 1:
            if left >= minimums[index]:
                yield (*prefix, left)
            return
        for count in range(minimums[index], left - rest[index] + 1):
            yield from extend(index + 1, left - count, (*prefix, count))

    yield from extend(0, total, ())
