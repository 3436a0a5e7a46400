"""Micro-batches by token budget instead of by row count.

A row is a left-padded prompt followed by a right-padded response. A pass
drops the columns that are padding in every row (``remove_padding``), so its
width is the longest *prompt* plus the longest *response* of its rows — which
may come from two different rows — and it costs rows × that width. Rows are
described by their extents ``(prompt tokens, response tokens)``
(:func:`row_extents`); a plain int is a row whose tokens are all on one side.
With ``micro_batch_tokens`` set, rows are grouped so that this padded size
stays within the budget: many short rows share a pass, long rows get passes
of their own. Every data-parallel
rank must run the same number of passes (FSDP gathers and reduces once per
pass), so each rank computes how many it needs, the ranks agree on the
largest, and every rank splits its rows into exactly that many groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

RowExtent = int | tuple[int, int]
"""One row's tokens: ``(prompt, response)``, or an int (every token on one side)."""


def row_extents(attention_mask: torch.Tensor, response_width: int) -> list[tuple[int, int]]:
    """``(prompt tokens, response tokens)`` of each row of a (B, P + R) attention mask."""
    prompt = attention_mask[:, : attention_mask.shape[1] - response_width].sum(dim=-1)
    response = attention_mask[:, attention_mask.shape[1] - response_width :].sum(dim=-1)
    return list(zip(prompt.tolist(), response.tolist(), strict=True))


def _extent(row: RowExtent) -> tuple[int, int]:
    return (int(row), 0) if isinstance(row, int) else (int(row[0]), int(row[1]))


def padded_cost(lengths: Sequence[RowExtent], rows: Sequence[int]) -> int:
    """Tokens a pass over ``rows`` computes: row count × (longest prompt + longest response)."""
    if not rows:
        return 0
    extents = [_extent(lengths[r]) for r in rows]
    return len(rows) * (max(p for p, _ in extents) + max(r for _, r in extents))


def packed_cost(lengths: Sequence[RowExtent], rows: Sequence[int]) -> int:
    """Tokens a packed pass over ``rows`` computes: the sum of their lengths (no padding)."""
    return sum(_total(lengths[r]) for r in rows)


def _total(row: RowExtent) -> int:
    prompt, response = _extent(row)
    return prompt + response


def _greedy(
    lengths: Sequence[RowExtent], order: Sequence[int], budget: int, cost: Any
) -> list[list[int]]:
    groups: list[list[int]] = []
    for row in order:
        if groups and cost(lengths, [*groups[-1], row]) <= budget:
            groups[-1].append(row)
        else:
            groups.append([row])  # a row longer than the budget still gets its own pass
    return groups


def token_budget_groups(
    lengths: Sequence[RowExtent],
    budget: int,
    *,
    count: int | None = None,
    by_length: bool = False,
    packed: bool = False,
) -> list[list[int]]:
    """Row indices per pass, each pass's padded cost within ``budget`` where possible.

    ``lengths``: each row's extent (:data:`RowExtent`); the cost of a pass is
    :func:`padded_cost`. ``by_length``: group rows of similar length (longest first), which wastes
    the least padding — for training, where the order of rows in a
    mini-batch does not matter; otherwise the passes take consecutive rows,
    so concatenating their outputs keeps the batch's order (inference).
    ``count``: split into exactly this many non-empty passes (at least as
    many as the budget needs, at most one per row) by halving the costliest
    pass; ranks agree on it so they run the same number of passes. ``packed``:
    the rows of a pass are packed into one sequence (``packing``), so a pass
    costs :func:`packed_cost`, the sum of its rows' lengths.
    """
    cost = packed_cost if packed else padded_cost
    if budget < 1:
        raise ValueError(f"token budget must be >= 1, got {budget}")
    order = (
        sorted(range(len(lengths)), key=lambda r: (-_total(lengths[r]), r)) if by_length else None
    )
    groups = _greedy(lengths, order if order is not None else range(len(lengths)), budget, cost)
    if count is None:
        return groups
    if not len(groups) <= count <= len(lengths):
        raise ValueError(
            f"cannot split {len(lengths)} rows into {count} passes (the budget needs {len(groups)})"
        )
    while len(groups) < count:
        splittable = [i for i, g in enumerate(groups) if len(g) > 1]
        worst = max(splittable, key=lambda i: (cost(lengths, groups[i]), -i))
        group = groups[worst]
        half = len(group) // 2
        groups[worst : worst + 1] = [group[:half], group[half:]]
    return groups
