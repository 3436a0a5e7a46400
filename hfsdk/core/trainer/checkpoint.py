"""Atomic checkpoints under ``<run_dir>/checkpoints/step_N``.

A checkpoint is written into a temporary sibling directory and renamed into
place only when complete, so a crash never leaves a half-written ``step_N``
that a resume would pick up.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

CHECKPOINTS = "checkpoints"
COMPLETE_MARKER = "COMPLETE"
_STEP_DIR = re.compile(r"^step_(\d+)$")


def checkpoint_root(run_dir: Path) -> Path:
    """``<run_dir>/checkpoints``."""
    return run_dir / CHECKPOINTS


def latest_checkpoint(run_dir: Path) -> tuple[int, Path] | None:
    """The newest complete checkpoint as ``(step, path)``, or ``None``."""
    root = checkpoint_root(run_dir)
    if not root.is_dir():
        return None
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (child / COMPLETE_MARKER).exists():
            found.append((int(match.group(1)), child))
    return max(found) if found else None


def write_checkpoint(run_dir: Path, step: int, save: Callable[[Path], None]) -> Path:
    """Call ``save(tmp_dir)`` and atomically publish ``tmp_dir`` as ``step_<step>``."""
    root = checkpoint_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step}"
    tmp = root / f".step_{step}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        save(tmp)
        (tmp / COMPLETE_MARKER).write_text(f"{step}\n")
        if final.exists():  # a rerun of the same step replaces the old copy
            old = root / f".step_{step}.old-{os.getpid()}"
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
