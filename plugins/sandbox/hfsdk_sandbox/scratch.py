"""Scratch directories of sandboxed runs, named after the process that made them.

A run removes its directory when it ends; a worker killed mid-run (``SIGKILL``,
the OOM killer) cannot, and the directory — holding the model's code and its
input — stayed in ``/tmp``. The creating pid is in the name, so the next
process sweeps the directories whose owner is gone, as :mod:`.cgroup` does for
cgroups.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

PREFIX = "hfsdk-sandbox-"
_STALE_S = 300.0  # /tmp may be shared with another pid namespace: its live pids look dead here
_swept: set[Path] = set()


def _sweep(parent: Path) -> None:
    """Remove ``hfsdk-sandbox-<pid>-*`` directories older than a few minutes whose pid is gone."""
    if parent in _swept:
        return
    _swept.add(parent)
    now = time.time()
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            pid = child.name[len(PREFIX) :].split("-", 1)[0]
            if not (child.name.startswith(PREFIX) and pid.isdigit()):
                continue
            try:
                os.kill(int(pid), 0)
                continue  # alive (or a reused pid: kept, the safe side)
            except ProcessLookupError:
                pass
            except OSError:
                continue
            with contextlib.suppress(OSError):
                if now - child.lstat().st_mtime > _STALE_S and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)


def make_scratch(parent: Path | None = None, kind: str = "") -> Path:
    """A fresh private directory ``hfsdk-sandbox-<pid>-<kind>…``, after sweeping stale ones."""
    parent = Path(parent or tempfile.gettempdir())
    _sweep(parent)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{kind}", dir=parent))
