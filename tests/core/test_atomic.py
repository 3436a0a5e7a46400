"""One atomic-write helper: temp file in the directory, fsync, rename, fsync the directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hfsdk.core import atomic
from hfsdk.core.atomic import atomic_path, write_text_atomic


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``os.fsync`` was called on (files and directories), in order."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    return seen


def test_the_file_and_its_directory_are_fsynced(tmp_path: Path, synced: list[str]) -> None:
    target = tmp_path / "sub" / "config.yaml"
    write_text_atomic(target, "a: 1\n")
    assert target.read_text() == "a: 1\n"
    # The temporary file is synced before the rename, the directory after it.
    assert len(synced) == 2 and synced[1] == str(target.parent)
    assert Path(synced[0]).parent == target.parent and synced[0] != str(target)
    assert [p.name for p in target.parent.iterdir()] == ["config.yaml"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "state.pt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.pt"]


def test_hfsdks_writers_go_through_it(tmp_path: Path, synced: list[str]) -> None:
    from hfsdk.core.trainer.tracking import Tracker

    tracker = Tracker(tmp_path, ("jsonl",), total_steps=2)
    tracker.log(1, {"x": 1.0})
    tracker.close()
    Tracker(tmp_path, ("jsonl",), total_steps=2, start_step=1).close()  # resume truncation
    dirs = [p for p in synced if Path(p).is_dir()]
    assert dirs == [str(tmp_path)]
