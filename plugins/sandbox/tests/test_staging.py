"""A root caller starts bubblewrap as uid 65534, which cannot search a ``0700`` ``/root``
(pyenv, conda in ``~``): what it must reach there is bind-mounted, read-only, into the run's
scratch directory in a mount namespace of the launcher's own, and bwrap is given the staged
source with the original destination. Nothing changes on the host."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hfsdk_sandbox.bwrap import _reachable, _stage, launcher
from hfsdk_sandbox.scratch import make_scratch


@pytest.fixture
def private(tmp_path: Path) -> Path:
    """A ``0700`` directory like ``/root``, holding a library dir, a file and a link to it."""
    home = tmp_path.resolve() / "home"
    home.mkdir()
    (home / "lib").mkdir()
    (home / "libpython.so.1").write_text("")
    (home / "libpython.so").symlink_to("libpython.so.1")
    home.chmod(0o700)
    return home


def test_a_path_below_a_directory_others_cannot_search_is_unreachable(private: Path) -> None:
    assert not _reachable(str(private / "lib"))
    assert not _reachable(str(private / "libpython.so"))
    searchable = all(os.stat(p).st_mode & 0o001 for p in ("/", "/usr"))
    assert _reachable("/usr/lib") == searchable


def test_unreachable_sources_are_staged_once_with_their_destinations_kept(
    private: Path, tmp_path: Path
) -> None:
    if not _reachable("/usr/lib"):
        pytest.skip("/usr is not searchable by others here")
    stage = tmp_path / "stage"
    lib, so, link = (str(private / n) for n in ("lib", "libpython.so.1", "libpython.so"))
    argv = [
        str(private / "bwrap"),
        *("--ro-bind", "/usr/lib", "/usr/lib"),
        *("--ro-bind", lib, lib),
        *("--ro-bind", so, "/lib/libpython.so.1"),
        *("--ro-bind", link, "/lib/libpython.so"),
        *("--tmpfs", lib + "/site-packages"),
        *("--", "python", "--ro-bind", lib, lib),
    ]
    staged, pairs = _stage(argv, stage)
    s0, s1, s2 = (str(stage / str(n)) for n in range(3))
    assert staged == [
        s0,
        *("--ro-bind", "/usr/lib", "/usr/lib"),  # reachable: as it was
        *("--ro-bind", s1, lib),
        *("--ro-bind", s2, "/lib/libpython.so.1"),
        *("--ro-bind", s2, "/lib/libpython.so"),  # a link and its target: one mount
        *("--tmpfs", lib + "/site-packages"),
        *("--", "python", "--ro-bind", lib, lib),  # the program's arguments: untouched
    ]
    assert pairs == [str(private / "bwrap"), s0, lib, s1, so, s2]
    assert _stage(argv[:4], stage) == ([s0, *argv[1:4]], [str(private / "bwrap"), s0])
    assert launcher(["/usr/bin/env"], None, stage)[5:9] == ["", str(stage), "0", "/usr/bin/env"]


@pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0, reason="the launcher stages as root only"
)
def test_the_launcher_stages_read_only_in_its_own_namespace(
    private: Path, request: pytest.FixtureRequest
) -> None:
    sh = shutil.which("sh")
    assert sh is not None
    shutil.copy2(os.path.realpath(sh), private / "sh")  # a program 65534 cannot reach
    data = private / "lib"
    (data / "data.txt").write_text("staged-data\n")
    scratch = make_scratch(kind="test-")  # private, in a directory others may search
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    script = 'id -u; cat "$1/data.txt"; echo x > "$1/new" || echo read-only; ls "$2" || true'
    argv = [str(private / "sh"), "-c", script, "--ro-bind", str(data), str(data)]
    before = Path("/proc/self/mountinfo").read_text()
    done = subprocess.run(
        launcher(argv, None, scratch), capture_output=True, text=True, timeout=30, env={}
    )
    if "unshare(CLONE_NEWNS)" in done.stderr:
        pytest.skip(f"no mount namespace for root here: {done.stderr.strip()}")
    lines = done.stdout.splitlines()
    assert lines[:3] == ["65534", "staged-data", "read-only"], (done.stdout, done.stderr)
    assert not (data / "new").exists()
    assert "Read-only file system" in done.stderr
    assert "Permission denied" in done.stderr  # the original path: out of 65534's reach
    assert list(scratch.iterdir()) == []  # the mounts were in the launcher's namespace only
    assert Path("/proc/self/mountinfo").read_text() == before
    assert oct(private.stat().st_mode & 0o777) == "0o700"
