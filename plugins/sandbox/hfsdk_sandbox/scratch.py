"""Scratch directories of sandboxed runs, named after the process that made them.

A run removes its directory when it ends; a worker killed mid-run (``SIGKILL``,
the OOM killer) cannot, and the directory — holding the model's code and its
input — stayed in ``/tmp``. The creating pid is in the name, so the next
process sweeps the directories whose owner is gone, as :mod:`.cgroup` does for
cgroups.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "hfsdk-sandbox-"
_STALE_S = 300.0  # /tmp may be shared with another pid namespace: its live pids look dead here
_REMOVE_BUDGET_S = 60.0  # a tree of millions of files is left (and logged), not waited on
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_swept: set[Path] = set()


def _clear(fd: int) -> list[str]:
    """Unlink what in the directory ``fd`` is not a directory; return its subdirectories."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return subdirs


def _remove_tree(path: Path, deadline: float) -> None:
    """Remove ``path`` bottom-up: a loop, not recursion, one descriptor per level open.

    Every step is relative to a descriptor opened without following symlinks, so no path is
    longer than a name and a link swapped in is not followed. Raises ``OSError`` (a tree
    changing underneath, one deeper than the descriptors allowed, ``TimeoutError`` past
    ``deadline``) with the tree partly removed.
    """
    # (descriptor of a directory, its subdirectories still to remove, its name in its parent)
    stack: list[tuple[int, list[str], str]] = [(os.open(path.parent, _DIR_FLAGS), [path.name], "")]
    try:
        while stack:
            if time.monotonic() > deadline:
                raise TimeoutError(f"removing {path} took over {_REMOVE_BUDGET_S:.0f} s")
            fd, pending, _ = stack[-1]
            if pending:
                name = pending.pop()
                stack.append((os.open(name, _DIR_FLAGS, dir_fd=fd), [], name))
                stack[-1][1].extend(_clear(stack[-1][0]))
                continue
            fd, _, name = stack.pop()
            os.close(fd)
            if stack:
                os.rmdir(name, dir_fd=stack[-1][0])
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def remove_scratch(path: Path) -> None:
    """Remove the tree at ``path`` (a scratch directory); never raises, logs what stays.

    ``shutil.rmtree`` recurses once per level: a process-mode program built a tree ~1,500
    levels deep and the ``RecursionError`` (which ``ignore_errors`` does not catch) ended the
    run, and every later sweep. Where the walk here stops (see :func:`_remove_tree`),
    ``rm -rf`` in a child, with the same time budget, removes what is left.
    """
    deadline = time.monotonic() + _REMOVE_BUDGET_S
    try:
        _remove_tree(path, deadline)
        return
    except TimeoutError:
        pass  # rm would take as long again
    # Never raise: a cleanup error ended the caller's run (and every later make_scratch).
    except Exception:
        rm = shutil.which("rm", path="/usr/bin:/bin")
        if rm is not None and os.path.lexists(path):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(
                    [rm, "-rf", "--one-file-system", "--", os.fspath(path)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env={},
                    timeout=max(1.0, deadline - time.monotonic()),
                    check=False,
                )
    if os.path.lexists(path):
        log.warning("sandbox: could not remove the scratch directory %s; remove it by hand", path)


def _owner_gone(pid: str) -> bool:
    """Whether ``pid`` (from a directory's name) is a pid and no process has it here."""
    # isdigit() took "²" (int() refuses it) and a 20-digit number overflowed os.kill: anyone
    # may name a directory in a shared /tmp, and the error ended every later make_scratch.
    if not (pid.isascii() and pid.isdecimal()):
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError, OverflowError):
        return False
    return False  # alive (or a reused pid: kept, the safe side)


def _sweep(parent: Path) -> None:
    """Remove ``hfsdk-sandbox-<pid>-*`` directories older than a few minutes whose pid is gone.

    Best effort: whatever a directory is, the sweep never raises.
    """
    if parent in _swept:
        return
    _swept.add(parent)
    now = time.time()
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            if not child.name.startswith(PREFIX):
                continue
            if not _owner_gone(child.name[len(PREFIX) :].split("-", 1)[0]):
                continue
            with contextlib.suppress(OSError):
                if now - child.lstat().st_mtime > _STALE_S and not child.is_symlink():
                    remove_scratch(child)


def make_scratch(parent: Path | None = None, kind: str = "") -> Path:
    """A fresh private directory ``hfsdk-sandbox-<pid>-<kind>…``, after sweeping stale ones."""
    parent = Path(parent or tempfile.gettempdir())
    _sweep(parent)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{kind}", dir=parent))
