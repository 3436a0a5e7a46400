"""Atomic checkpoints: complete ones are found, failed ones leave nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.trainer.checkpoint import (
    clean_partial,
    complete_checkpoints,
    latest_checkpoint,
    verify_checkpoint,
    write_checkpoint,
)


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


def _two_files(directory: Path) -> None:
    (directory / "actor").mkdir()
    (directory / "actor" / "engine.pt").write_bytes(b"e" * 100)
    (directory / "trainer_state.pt").write_bytes(b"s" * 10)


def test_the_marker_lists_every_file_and_catches_damage(tmp_path: Path) -> None:
    path = write_checkpoint(tmp_path, 2, _two_files)
    assert verify_checkpoint(path) is None
    (path / "actor" / "engine.pt").write_bytes(b"e" * 50)
    assert "engine.pt has 50 bytes, 100 were written" in str(verify_checkpoint(path))
    (path / "actor" / "engine.pt").unlink()
    assert "engine.pt is missing" in str(verify_checkpoint(path))
    (path / "actor" / "engine.pt").write_bytes(b"e" * 99 + b"f")  # same size, a byte changed
    assert "engine.pt does not match its xxh3_128 checksum" in str(verify_checkpoint(path))
    (path / "COMPLETE").write_text('{"step": 2, "files": {"actor/engine.pt": 100}}')
    assert verify_checkpoint(path) is None  # a marker from before checksums: sizes only
    (path / "COMPLETE").write_text("{not json")
    assert "COMPLETE is corrupt" in str(verify_checkpoint(path))
    (path / "COMPLETE").write_text("2\n")  # an older marker: trusted
    assert verify_checkpoint(path) is None


def test_clean_partial_removes_killed_saves_and_finishes_complete_ones(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 2, _two_files)
    root = tmp_path / "checkpoints"
    half = root / ".step_4.tmp-123"  # killed before its marker
    half.mkdir()
    (half / "trainer_state.pt").write_bytes(b"x")
    done = write_checkpoint(tmp_path, 6, _two_files)
    done.rename(root / ".step_6.tmp-124")  # killed between marker and rename
    old = write_checkpoint(tmp_path, 2, _two_files)
    old.rename(root / ".step_8.old-125")  # a stale old copy of a step that exists below
    (root / "step_8").mkdir()
    actions = clean_partial(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == ["step_6", "step_8"]
    assert "published .step_6.tmp-124 as step_6" in actions
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [6]  # step_8 has no marker
