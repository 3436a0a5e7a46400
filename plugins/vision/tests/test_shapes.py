"""The shapes data and reward."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from hfsdk import HfsdkError
from hfsdk_vision.data import load_verl_parquet
from hfsdk_vision.shapes import BACKGROUND, COLOURS, draw, shapes_reward, shapes_rows, write_parquet


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


def test_the_largest_shape_has_the_answers_colour() -> None:
    rng = random.Random(0)
    for _ in range(50):
        large, small = rng.sample(list(COLOURS), 2)
        pixels = np.asarray(draw(large, small, rng))
        counts = {name: int((pixels == rgb).all(-1).sum()) for name, rgb in COLOURS.items()}
        background = int((pixels == BACKGROUND).all(-1).sum())
        assert counts[large] > 4 * counts[small] > 0  # apart: neither covers the other
        assert background + counts[large] + counts[small] == 56 * 56  # nothing else drawn
        assert all(counts[c] == 0 for c in COLOURS if c not in (large, small))


def test_rows_are_reproducible_and_load_as_verl_data(tmp_path: Path) -> None:
    rows = shapes_rows(12, seed=5)
    assert rows == shapes_rows(12, seed=5) and rows != shapes_rows(12, seed=6)
    prompts = load_verl_parquet(write_parquet(rows, tmp_path / "shapes.parquet"))
    assert [p.columns["answer"] for p in prompts] == [r["answer"] for r in rows]
    assert all(p.images[0].size == (56, 56) for p in prompts)
    assert {r["answer"] for r in shapes_rows(200)} == set(COLOURS)
