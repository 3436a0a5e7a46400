"""Scratch directories a killed worker left behind (holding model code) are swept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hfsdk_sandbox import scratch


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_a_dead_workers_old_scratch_dir_is_removed_a_live_ones_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "_swept", set())
    dead = tmp_path / f"{scratch.PREFIX}{_dead_pid()}-abc"
    live = tmp_path / f"{scratch.PREFIX}{os.getpid()}-def"
    other = tmp_path / "hfsdk-sandbox-unrelated"
    for path in (dead, live, other):
        path.mkdir()
        (path / "main.py").write_text("secret model code")
        os.utime(path, (0, 0))
    made = scratch.make_scratch(tmp_path)
    try:
        assert not dead.exists()
        assert live.exists() and other.exists()
        assert made.name.startswith(f"{scratch.PREFIX}{os.getpid()}-")
    finally:
        made.rmdir()


def test_a_fresh_dir_of_a_dead_pid_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another container's worker may share /tmp but not our pid namespace: age is the guard.
    monkeypatch.setattr(scratch, "_swept", set())
    fresh = tmp_path / f"{scratch.PREFIX}{_dead_pid()}-abc"
    fresh.mkdir()
    scratch.make_scratch(tmp_path).rmdir()
    assert fresh.exists()
