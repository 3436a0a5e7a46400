"""A worker's checkpoint part: a damaged RNG file is named in the error, a missing one warned."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_backend_common.worker_checkpoint import load_rank_checkpoint, save_rank_checkpoint


class _Engine:
    def save_checkpoint(self, path: Path) -> None:
        pass

    def load_checkpoint(self, path: Path) -> None:
        pass


def test_a_truncated_rng_file_is_named(tmp_path: Path) -> None:
    save_rank_checkpoint(_Engine(), str(tmp_path), 0, lambda: {"torch": torch.get_rng_state()})
    rng = tmp_path / "rng_rank0.pt"
    rng.write_bytes(rng.read_bytes()[: rng.stat().st_size // 2])
    restored: list[Any] = []
    with pytest.raises(HfsdkError) as info:
        load_rank_checkpoint(_Engine(), str(tmp_path), 0, restored.append, lambda: None)
    # Before: "RuntimeError: PytorchStreamReader failed reading zip archive", no file named.
    message = str(info.value)
    assert f"RNG file {str(rng)!r}" in message and "cannot be read" in message, message
    assert "\n" not in message and not restored


def test_a_missing_rng_file_is_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    save_rank_checkpoint(_Engine(), str(tmp_path), 0, lambda: {"torch": torch.get_rng_state()})
    (tmp_path / "rng_rank0.pt").unlink()
    restored: list[Any] = []
    with caplog.at_level(logging.WARNING):
        load_rank_checkpoint(_Engine(), str(tmp_path), 0, restored.append, lambda: None)
    # Before: the run resumed on a fresh stream without a word.
    assert not restored
    assert any("has no rng_rank0.pt" in r.getMessage() for r in caplog.records), caplog.text
