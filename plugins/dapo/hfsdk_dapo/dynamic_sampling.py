"""DAPO's dynamic sampling: keep only prompt groups whose samples disagree.

A group whose responses all score the same has zero advantage under group
normalisation, so it contributes no gradient; dropping it and drawing more
prompts keeps every step's batch full of learning signal.
"""

from __future__ import annotations

from collections.abc import Sequence


def informative_groups(group_ids: Sequence[object], scores: Sequence[float]) -> list[object]:
    """The groups (in first-seen order) whose samples do not all have the same score.

    The scores must be finite: a NaN differs from every score, itself included, so its
    group would count as informative (the algorithm refuses non-finite scores first).
    """
    values: dict[object, set[float]] = {}
    for gid, score in zip(group_ids, scores, strict=True):
        values.setdefault(gid, set()).add(round(float(score), 9))
    return [gid for gid, seen in values.items() if len(seen) > 1]


def rows_of(group_ids: Sequence[object], keep: Sequence[object]) -> list[int]:
    """Row indices of the samples in the ``keep`` groups, in the order of ``keep``."""
    by_group: dict[object, list[int]] = {}
    for row, gid in enumerate(group_ids):
        by_group.setdefault(gid, []).append(row)
    return [row for gid in keep for row in by_group[gid]]
