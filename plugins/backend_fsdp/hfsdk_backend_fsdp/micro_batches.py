"""Micro-batches by token budget instead of by row count.

A forward/backward pass costs about rows × the longest row's tokens (rows
are padded to the longest one in the pass). With ``micro_batch_tokens`` set,
rows are grouped so that this padded size stays within the budget: many short
rows share a pass, long rows get passes of their own. Every data-parallel
rank must run the same number of passes (FSDP gathers and reduces once per
pass), so each rank computes how many it needs, the ranks agree on the
largest, and every rank splits its rows into exactly that many groups.
"""

from __future__ import annotations

from collections.abc import Sequence


def padded_cost(lengths: Sequence[int], rows: Sequence[int]) -> int:
    """Tokens a pass over ``rows`` computes: row count × the longest row."""
    return len(rows) * max((lengths[r] for r in rows), default=0)


def _greedy(lengths: Sequence[int], order: Sequence[int], budget: int) -> list[list[int]]:
    groups: list[list[int]] = []
    for row in order:
        if groups and padded_cost(lengths, [*groups[-1], row]) <= budget:
            groups[-1].append(row)
        else:
            groups.append([row])  # a row longer than the budget still gets its own pass
    return groups


def token_budget_groups(
    lengths: Sequence[int], budget: int, *, count: int | None = None, by_length: bool = False
) -> list[list[int]]:
    """Row indices per pass, each pass's padded cost within ``budget`` where possible.

    ``by_length``: group rows of similar length (longest first), which wastes
    the least padding — for training, where the order of rows in a
    mini-batch does not matter; otherwise the passes take consecutive rows,
    so concatenating their outputs keeps the batch's order (inference).
    ``count``: split into exactly this many non-empty passes (at least as
    many as the budget needs, at most one per row) by halving the costliest
    pass; ranks agree on it so they run the same number of passes.
    """
    if budget < 1:
        raise ValueError(f"token budget must be >= 1, got {budget}")
    order = sorted(range(len(lengths)), key=lambda r: (-lengths[r], r)) if by_length else None
    groups = _greedy(lengths, order if order is not None else range(len(lengths)), budget)
    if count is None:
        return groups
    if not len(groups) <= count <= len(lengths):
        raise ValueError(
            f"cannot split {len(lengths)} rows into {count} passes (the budget needs {len(groups)})"
        )
    while len(groups) < count:
        splittable = [i for i, g in enumerate(groups) if len(g) > 1]
        worst = max(splittable, key=lambda i: (padded_cost(lengths, groups[i]), -i))
        group = groups[worst]
        half = len(group) // 2
        groups[worst : worst + 1] = [group[:half], group[half:]]
    return groups
