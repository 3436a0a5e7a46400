"""A step's rows drawn again while every row is over-long (SFT, DPO, reward models)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from hfsdk import Batch

Drawn = TypeVar("Drawn")

REDRAWS = 64
"""Draws a step makes past one whose rows are all over-long: 64 steps' rows in a row too long
is data almost all too long (preflight refuses data where all of it is)."""


def draw_step_rows(
    prepare: Callable[[Batch], Drawn],
    rows: Batch,
    usable: Callable[[Drawn], bool],
    next_rows: Callable[[int], Batch] | None,
) -> list[Drawn]:
    """``prepare`` of the step's rows, then of the stream's next rows of the same size while the
    last draw is not ``usable`` (up to :data:`REDRAWS` more; none without ``next_rows``, a run
    with no stream to draw from). Returns every draw, the one to train on last: callers count
    what the others left out. Before, a step whose rows were all too long stopped the run mid-way,
    and every resume at that step."""
    draws = [prepare(rows)]
    for _ in range(REDRAWS if next_rows is not None else 0):
        if usable(draws[-1]):
            break
        draws.append(prepare(next_rows(len(rows))))
    return draws
