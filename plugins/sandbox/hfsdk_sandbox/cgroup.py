"""A pids cgroup per sandboxed run: a task cap that also binds root.

The kernel exempts root (and a user namespace mapped onto root) from
``RLIMIT_NPROC``; a cgroup's ``pids.max`` counts every task — processes and
threads — whoever owns it. One is made where this process may create one
(cgroup v2 with the ``pids`` controller delegated, or a writable v1 ``pids``
hierarchy); elsewhere :func:`make_pids_cgroup` returns ``None`` and the
seccomp filter's no-new-processes rule is the cap.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")


def _candidates(root: Path = _ROOT) -> list[Path]:
    """Directories a child cgroup with ``pids.max`` could be made in, best first."""
    out: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        rel = path.lstrip("/")
        if hierarchy == "0" and controllers == "":  # cgroup v2 (unified)
            for base in (root, root / "unified"):
                if (base / "cgroup.controllers").exists():
                    out.append(base / rel)
        elif "pids" in controllers.split(","):
            out.append(root / "pids" / rel)
    return out


class PidsCgroup:
    """A cgroup made for one run: its ``cgroup.procs`` takes the run's first process."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def procs(self) -> Path:
        """The file a process writes its pid to, to join."""
        return self.path / "cgroup.procs"

    def kill_all(self) -> None:
        """SIGKILL every task left in the cgroup, until it is empty (at most about 2 s)."""
        for _ in range(200):
            try:
                pids = [int(p) for p in self.procs.read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and remove the cgroup (best effort: a busy one stays)."""
        self.kill_all()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


_PREFIX = "hfsdk-sandbox-"
_STALE_S = 300.0
_swept: set[Path] = set()


def _sweep(parent: Path) -> None:
    """Remove empty cgroups a killed trainer left behind (once per parent and process).

    Only those older than a few minutes: a fresh one may not have its process yet.
    """
    if parent in _swept:
        return
    _swept.add(parent)
    now = time.time()
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            if not child.name.startswith(_PREFIX):
                continue
            with contextlib.suppress(OSError):
                if (
                    now - child.stat().st_mtime > _STALE_S
                    and not (child / "cgroup.procs").read_text().strip()
                ):
                    child.rmdir()


def make_pids_cgroup(max_tasks: int, root: Path = _ROOT) -> PidsCgroup | None:
    """A fresh cgroup with ``pids.max = max_tasks``, or ``None`` where none can be made."""
    for parent in _candidates(root):
        _sweep(parent)
        path = parent / f"{_PREFIX}{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
        except OSError:
            continue
        try:
            (path / "pids.max").write_text(str(max_tasks))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            continue
        return PidsCgroup(path)
    return None
