"""The shapes data and reward."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from hfsdk import HfsdkError
from hfsdk_vision.data import load_verl_parquet
from hfsdk_vision.shapes import COLOURS, draw, shapes_reward, shapes_rows, write_parquet


def test_the_reward_checks_the_first_word() -> None:
    prompts = ["p"] * 4
    responses = ["red", "Blue </s>", "green red", ""]
    assert shapes_reward(prompts, responses, answer=["red", "blue", "red", "red"]) == [
        1.0,
        1.0,
        0.0,
        0.0,
    ]
    with pytest.raises(HfsdkError, match="'answer' column"):
        shapes_reward(prompts, responses)


def test_the_square_has_the_answers_colour() -> None:
    rng = random.Random(0)
    for _ in range(20):
        square, circle = rng.sample(list(COLOURS), 2)
        pixels = np.asarray(draw(square, circle, rng))
        colours = {name: (pixels == rgb).all(-1) for name, rgb in COLOURS.items()}
        # the square fills its bounding box; the circle does not
        ys, xs = np.nonzero(colours[square])
        box = colours[square][ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
        assert box.all()
        ys, xs = np.nonzero(colours[circle])
        assert not colours[circle][ys.min() : ys.max() + 1, xs.min() : xs.max() + 1].all()


def test_rows_are_reproducible_and_load_as_verl_data(tmp_path: Path) -> None:
    rows = shapes_rows(12, seed=5)
    assert rows == shapes_rows(12, seed=5) and rows != shapes_rows(12, seed=6)
    prompts = load_verl_parquet(write_parquet(rows, tmp_path / "shapes.parquet"))
    assert [p.columns["answer"] for p in prompts] == [r["answer"] for r in rows]
    assert all(p.images[0].size == (56, 56) for p in prompts)
    assert {r["answer"] for r in shapes_rows(200)} == set(COLOURS)
