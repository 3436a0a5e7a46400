"""One run directory, one writer: an exclusive lock file holding the writer's PID.

The lock is an ``flock`` on ``<run_dir>/.lock``: the kernel drops it when the
process ends however it ends (``kill -9`` included), so a lock file left by a
dead process is simply taken over. A second process asking for a held lock
gets an :class:`~hfsdk.core.errors.HfsdkError` naming the holder's PID. (On
network filesystems without ``flock`` support the lock is advisory at best.)
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from hfsdk.core.errors import HfsdkError

LOCK_FILE = ".lock"


class RunDirLock:
    """Holds the run directory's lock from :meth:`acquire` until :meth:`release`."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise HfsdkError(
                f"run directory {str(self.path.parent)!r} is in use by another hfsdk run "
                f"(pid {holder}); wait for it to finish, stop it, or pass another --run-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the file stays; an unlocked file means nobody holds it)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None
