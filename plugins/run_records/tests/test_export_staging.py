"""``hfsdk export``'s staging folders: a killed export's is removed by the next, a live one's
is kept; the session it opens starts no rollout replicas (fast: no run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


class _Started(Exception):
    """Raised by the stand-in session: what the export would start is recorded by then."""


def test_export_starts_no_rollout_replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the run's whole config went to the session, which started the rollout pool's
    # replicas (and needed its devices) only to export the trained roles.
    import hfsdk
    from hfsdk.core.config import load_run_config
    from hfsdk_run_records import export

    pools = [
        "placement.pools={rollout: {devices: 2}, train: {devices: 1}}",
        "trainer.pipeline=async",
        "trainer.partial_rollout_tokens=4",
    ]
    run_config = load_run_config("grpo", None, pools)
    started = []

    def session(config: object, spec: object, prepared: object) -> None:
        started.append(config)
        raise _Started

    monkeypatch.setattr(export, "checkpoint_of", lambda run_dir, step: (1, tmp_path / "ckpt"))
    monkeypatch.setattr(export, "run_config_of", lambda run_dir, lora_merged: run_config)
    monkeypatch.setattr(hfsdk, "TrainingSession", session)
    (tmp_path / "run").mkdir()
    (tmp_path / "ckpt" / "actor").mkdir(parents=True)
    with pytest.raises(_Started):
        export.export_checkpoint(tmp_path / "run", tmp_path / "out")
    (config,) = started
    assert set(config.placement.pools) == {"train"}
    assert config.placement.pool_of("actor") == "train"
    assert config.trainer.partial_rollout_tokens == 0
    assert not (tmp_path / "out").exists()


def test_an_out_that_is_a_file_is_named_a_file(tmp_path: Path) -> None:
    """`hfsdk export r1 --out afile` said the file "exists and is not empty"."""
    from hfsdk import HfsdkError
    from hfsdk_run_records.export import export_checkpoint

    (tmp_path / "run").mkdir()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(HfsdkError, match=r"--out '.*afile' is a file, not a directory; pass a new"):
        export_checkpoint(tmp_path / "run", tmp_path / "afile")
    assert (tmp_path / "afile").read_text() == "x"
