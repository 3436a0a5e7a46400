"""Scratch directories a killed worker left behind (holding model code) are swept."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
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


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A directory on a tmpfs (``/dev/shm``) where there is one, else ``tmp_path``: making and
    removing a 2,000-deep tree on this machine's disk took seconds, on a tmpfs 0.1 s."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK | os.X_OK)):
        yield tmp_path
        return
    made = Path(tempfile.mkdtemp(prefix="hfsdk-test-", dir=shm))
    try:
        yield made
    finally:
        subprocess.run(["rm", "-rf", "--", str(made)], check=False)


def _deep_tree(root: Path, depth: int) -> None:
    """``root/d/d/…`` ``depth`` levels deep, a file at the bottom; made through directory
    descriptors, as a program can (the full path may be longer than PATH_MAX)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def test_a_tree_deeper_than_the_recursion_limit_is_removed(fast_tmp: Path) -> None:
    deep = fast_tmp / "deep"
    _deep_tree(deep, 2000)
    scratch.remove_scratch(deep)
    assert not deep.exists()
    scratch.remove_scratch(deep)  # gone already: nothing to do, nothing raised


def test_where_the_walk_stops_rm_removes_the_rest(
    fast_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As when the tree is deeper than the open descriptors allowed, or changed underneath.
    def stops(path: Path, deadline: float) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(scratch, "_remove_tree", stops)
    deep = fast_tmp / "deep"
    _deep_tree(deep, 50)
    scratch.remove_scratch(deep)
    assert not deep.exists()


def test_a_symlink_in_the_tree_is_removed_not_followed(fast_tmp: Path) -> None:
    outside = fast_tmp / "outside"
    outside.mkdir()
    (outside / "keep").write_text("the caller's")
    tree = fast_tmp / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "link").symlink_to(outside, target_is_directory=True)
    scratch.remove_scratch(tree)
    assert not tree.exists()
    assert (outside / "keep").read_text() == "the caller's"


def test_a_dead_workers_deep_tree_neither_breaks_the_sweep_nor_stays(
    fast_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process-mode program can build it before its worker is killed.
    monkeypatch.setattr(scratch, "_swept", set())
    deep = fast_tmp / f"{scratch.PREFIX}{_dead_pid()}-abc"
    _deep_tree(deep, 2000)
    os.utime(deep, (0, 0))
    scratch.make_scratch(fast_tmp).rmdir()
    assert not deep.exists()


@pytest.mark.parametrize("pid", ["99999999999999999999", "\u00b2", "\u0663"])
def test_a_dir_whose_pid_is_no_pid_does_not_break_make_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pid: str
) -> None:
    # Any user may make one in a shared /tmp: "²" is a digit to str.isdigit, not to int().
    monkeypatch.setattr(scratch, "_swept", set())
    odd = tmp_path / f"{scratch.PREFIX}{pid}-x"
    odd.mkdir()
    os.utime(odd, (0, 0))
    scratch.make_scratch(tmp_path).rmdir()
    assert odd.exists()  # not a name this code makes: left alone
