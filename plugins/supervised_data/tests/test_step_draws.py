"""A step's rows drawn again while they are all over-long."""

from __future__ import annotations

from hfsdk import Batch
from hfsdk_supervised_data.step_draws import REDRAWS, draw_step_rows


def _rows(*lengths: int) -> Batch:
    return Batch.from_dict(non_tensors={"length": list(lengths)})


def _short(rows: Batch) -> list[int]:
    return [n for n in rows["length"] if n <= 4]


def test_draws_stop_at_the_first_usable_one_and_keep_every_draw() -> None:
    stream = iter([_rows(9, 9), _rows(3, 9), _rows(1, 1)])
    sizes: list[int] = []

    def next_rows(n: int) -> Batch:
        sizes.append(n)
        return next(stream)

    draws = draw_step_rows(_short, _rows(8, 7), bool, next_rows)
    assert draws == [[], [], [3]]  # the step's draw, one all too long, the usable one
    assert sizes == [2, 2]  # each redraw asks for the step's size


def test_a_usable_step_and_a_run_without_a_stream_draw_once() -> None:
    def next_rows(n: int) -> Batch:
        raise AssertionError("drew again")

    assert draw_step_rows(_short, _rows(2, 9), bool, next_rows) == [[2]]
    assert draw_step_rows(_short, _rows(9), bool, None) == [[]]


def test_draws_stop_after_the_redraw_bound() -> None:
    draws = draw_step_rows(_short, _rows(9), bool, lambda n: _rows(9))
    assert len(draws) == 1 + REDRAWS and not any(draws)
