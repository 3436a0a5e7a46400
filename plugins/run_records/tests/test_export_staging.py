"""``hfsdk export``'s staging folders: a killed export's is removed by the next, a live one's
is kept (fast: no run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hfsdk_run_records.export import remove_stale_staging


def _dead_pid() -> int:
    """The id of a process that has exited (ids are reused only after many processes)."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_a_dead_exports_staging_folder_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    dead = _dead_pid()
    beside = tmp_path / f".out.tmp-export-{dead}"
    (beside / "actor").mkdir(parents=True)
    (beside / "actor" / "model.safetensors").write_bytes(b"x" * 64)
    inside = out / f".tmp-export-{dead}"  # where earlier versions staged
    (inside / "actor").mkdir(parents=True)
    live = tmp_path / f".out.tmp-export-{os.getpid()}"  # another export, still writing
    live.mkdir()
    other = tmp_path / f".other.tmp-export-{dead}"  # another --out's: not this export's to judge
    other.mkdir()
    remove_stale_staging(out)
    assert not beside.exists() and not inside.exists()
    assert live.is_dir() and other.is_dir()
    assert not any(out.iterdir())  # --out counts as empty again
    remove_stale_staging(tmp_path / "new" / "out")  # nothing there yet: nothing to do
