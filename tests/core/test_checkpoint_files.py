"""Checkpoint files are read with ``torch.load(weights_only=True)`` and hfsdk's allow-list."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from hfsdk import Batch, HfsdkError, load_checkpoint_file


class _RunsCode:
    """What a hostile checkpoint holds: unpickling it calls ``os.mkdir(marker)``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.mkdir, (str(self.marker),))


def test_a_checkpoint_that_would_run_code_is_refused_in_one_line(tmp_path: Path) -> None:
    marker = tmp_path / "code_ran"
    path = tmp_path / "trainer_state.pt"
    torch.save({"step": 3, "payload": _RunsCode(marker)}, path)
    with pytest.raises(HfsdkError) as info:
        load_checkpoint_file(path)
    message = str(info.value)
    assert "\n" not in message and "'posix.mkdir'" in message
    assert message.startswith(f"checkpoint file {str(path)!r} holds a ")
    assert not marker.exists()  # with weights_only=False it would have been created
    torch.load(path, weights_only=False)
    assert marker.exists()


def test_a_damaged_file_is_named_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.pt"
    path.write_bytes(bytes(range(256)))  # no zip, and a pickle opcode no reader takes
    with pytest.raises(HfsdkError, match=r"trainer_state.pt' holds damaged data; it is not"):
        load_checkpoint_file(path)


def test_what_hfsdk_saves_round_trips(tmp_path: Path) -> None:
    from hfsdk.core.rng import torch_rng_state

    batch = Batch.from_dict(
        {"input_ids": torch.arange(6).reshape(3, 2)},
        non_tensors={"prompt": ["a", "b", "c"], "extra": [{"k": 1}, None, [2]]},
        meta={"step": 1},
    )
    state = {
        "step": 7,
        "rng": {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "torch": torch_rng_state(),
        },
        "optimizer": torch.optim.AdamW([torch.nn.Parameter(torch.ones(2))]).state_dict(),
        "pipeline": {"ahead": [{"prompts": batch, "version": 2, "behaviour": None}]},
    }
    path = tmp_path / "state.pt"
    torch.save(state, path)
    loaded = load_checkpoint_file(path)
    assert loaded["step"] == 7 and loaded["rng"]["python"] == state["rng"]["python"]
    assert all(
        np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
        for a, b in zip(loaded["rng"]["numpy"], state["rng"]["numpy"], strict=True)
    )
    assert torch.equal(loaded["rng"]["torch"]["cpu"], state["rng"]["torch"]["cpu"])
    again = loaded["pipeline"]["ahead"][0]["prompts"]
    assert torch.equal(again["input_ids"], batch["input_ids"])
    assert list(again.non_tensors["extra"]) == [{"k": 1}, None, [2]]
    assert again.meta == {"step": 1}


def test_numpy_numbers_of_every_width_and_numpy_scalars_round_trip(tmp_path: Path) -> None:
    kinds = "?" + np.typecodes["AllInteger"] + np.typecodes["AllFloat"]
    columns = {f"c_{kind}": np.arange(2).astype(kind) for kind in kinds}
    columns["from_scalars"] = [np.float32(0.3), np.float32(0.9)]  # Batch keeps float32
    extra = [{"a": np.int64(1)}, {"a": np.float16(2)}]  # numpy scalars in an object column
    batch = Batch.from_dict(
        {"ids": torch.zeros(2, 3)}, {**columns, "extra": extra}, meta={"m": np.float64(0.5)}
    )
    path = tmp_path / "trainer_state.pt"
    torch.save({"step": 1, "pipeline": {"ahead": [batch]}}, path)
    again = load_checkpoint_file(path)["pipeline"]["ahead"][0]
    for name in columns:
        assert again[name].dtype == batch[name].dtype and np.array_equal(again[name], batch[name])
    assert list(again["extra"]) == extra and type(again["extra"][1]["a"]) is np.float16
    assert again.meta == {"m": 0.5} and type(again.meta["m"]) is np.float64


def test_a_refused_numpy_type_is_named_not_called_damage(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.pt"
    torch.save({"when": np.array(["2026-12-07"], dtype="datetime64[D]")}, path)
    with pytest.raises(HfsdkError) as info:
        load_checkpoint_file(path)
    assert "holds a 'numpy.dtypes.DateTime64DType' object hfsdk does not save" in str(info.value)
