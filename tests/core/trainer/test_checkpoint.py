"""Atomic checkpoints: complete ones are found, failed ones leave nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.trainer.checkpoint import latest_checkpoint, write_checkpoint


def test_latest_complete_checkpoint_wins(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None
    write_checkpoint(tmp_path, 2, lambda d: (d / "state").write_text("two"))
    write_checkpoint(tmp_path, 10, lambda d: (d / "state").write_text("ten"))
    (tmp_path / "checkpoints" / "step_12").mkdir()  # incomplete: no marker
    step, path = latest_checkpoint(tmp_path)  # type: ignore[misc]
    assert step == 10 and (path / "state").read_text() == "ten"


def test_a_failing_save_leaves_no_directory(tmp_path: Path) -> None:
    def broken(directory: Path) -> None:
        (directory / "half").write_text("x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_checkpoint(tmp_path, 3, broken)
    assert latest_checkpoint(tmp_path) is None
    assert list((tmp_path / "checkpoints").iterdir()) == []


def test_rewriting_a_step_replaces_it(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 1, lambda d: (d / "state").write_text("old"))
    write_checkpoint(tmp_path, 1, lambda d: (d / "state").write_text("new"))
    _, path = latest_checkpoint(tmp_path)  # type: ignore[misc]
    assert (path / "state").read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_1"]
