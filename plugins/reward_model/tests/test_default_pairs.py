"""The default task's preference pairs: right answers preferred, held-out pairs never trained."""

from __future__ import annotations

import json

from hfsdk_reward_model.default_pairs import (
    WRONG_PER_TRAIN_PROMPT,
    WRONG_PER_VAL_PROMPT,
    default_pair_files,
)


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_pairs_prefer_the_sum_and_the_held_out_pairs_were_never_trained_on() -> None:
    train_file, val_file = default_pair_files()
    train, val = _rows(train_file), _rows(val_file)
    trained = {(r["prompt"], r["rejected"].split()[-1]) for r in train}
    assert not any((r["prompt"], r["rejected"].split()[-1]) in trained for r in val)
    for row in train + val:
        a, b = (int(x) for x in row["prompt"].rstrip(" =").split(" + "))
        chosen, rejected = row["chosen"].split(), row["rejected"].split()
        assert int(chosen[-1]) == a + b
        assert int(rejected[-1]) != a + b
        assert chosen[:-1] == rejected[:-1]  # both with the filler word, or both without
    assert len(val) == len({r["prompt"] for r in val}) * WRONG_PER_VAL_PROMPT
    assert len(train) == len({r["prompt"] for r in train}) * WRONG_PER_TRAIN_PROMPT
    assert {len(r["chosen"].split()) for r in train} == {1, 2}
    assert default_pair_files() == (train_file, val_file)  # built once, then read
