"""Atomic checkpoints under ``<run_dir>/checkpoints/step_N``.

A checkpoint is written into a temporary sibling directory, its files are
flushed to disk, a ``COMPLETE`` marker listing every file with its size and
checksum (XXH3-128) is written last, and the directory is renamed into place only then. So a crash
(even ``kill -9`` mid-write) never leaves a ``step_N`` that a resume would pick
up half-written; the temporary directory it leaves is removed (or, if it was
complete, published) by :func:`clean_partial` at the next start. A checkpoint
whose files no longer match its marker (truncated, emptied, deleted) is
(truncated, emptied, deleted, a byte changed) is reported by
:func:`verify_checkpoint`, before any rank loads it, so the trainer can fall
back to an older one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from hfsdk.core.trainer.faults import take_fault

CHECKPOINTS = "checkpoints"
COMPLETE_MARKER = "COMPLETE"
_STEP_DIR = re.compile(r"^step_(\d+)$")
_PARTIAL_DIR = re.compile(r"^\.step_(\d+)\.(tmp|old)-\d+$")


def checkpoint_root(run_dir: Path) -> Path:
    """``<run_dir>/checkpoints``."""
    return run_dir / CHECKPOINTS


def complete_checkpoints(run_dir: Path, *, unmarked: bool = False) -> list[tuple[int, Path]]:
    """Every checkpoint with a ``COMPLETE`` marker as ``(step, path)``, newest first (with
    ``unmarked``, every ``step_N``: one is published with its marker, so one without is damaged)."""
    root = checkpoint_root(run_dir)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (unmarked or (child / COMPLETE_MARKER).exists()):
            found.append((int(match.group(1)), child))
    return sorted(found, reverse=True)


def latest_checkpoint(run_dir: Path) -> tuple[int, Path] | None:
    """The newest complete checkpoint as ``(step, path)``, or ``None``."""
    found = complete_checkpoints(run_dir)
    return found[0] if found else None


def _files(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != COMPLETE_MARKER:
            yield path


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


CHECKSUM = "xxh3_128"
"""The per-file checksum in a marker: xxHash's XXH3 128-bit (the ``xxhash`` package)."""
_CHUNK = 8 << 20


def file_checksum(path: Path) -> str:
    """The :data:`CHECKSUM` of ``path``'s content, as hex."""
    import xxhash

    digest = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _write_marker(directory: Path, step: int) -> None:
    files = {}
    for path in _files(directory):
        _fsync(path)
        files[path.relative_to(directory).as_posix()] = {
            "size": path.stat().st_size,
            CHECKSUM: file_checksum(path),
        }
    marker = directory / COMPLETE_MARKER
    marker.write_text(json.dumps({"step": step, "files": files}, indent=0) + "\n")
    _fsync(marker)


def verify_checkpoint(path: Path) -> str | None:
    """``None`` if every file the marker lists is there with its size and checksum, else what
    is wrong.

    Markers of older checkpoints hold only the step number, or sizes without
    checksums; what they hold is checked.
    """
    try:
        text = (path / COMPLETE_MARKER).read_text()
    except OSError as exc:
        return f"{path / COMPLETE_MARKER} cannot be read ({exc.strerror})"
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError:
        return f"{path / COMPLETE_MARKER} is corrupt"
    if not isinstance(manifest, dict):
        return None  # an older marker: the step number alone
    for name, entry in manifest.get("files", {}).items():
        # Markers written before checksums hold the size alone.
        size, checksum = (entry, None) if isinstance(entry, int) else (
            entry.get("size"), entry.get(CHECKSUM)
        )  # fmt: skip
        file = path / name
        if not file.is_file():
            return f"{file} is missing"
        actual = file.stat().st_size
        if actual != size:
            return f"{file} has {actual} bytes, {size} were written (truncated or corrupt)"
        if checksum is not None and file_checksum(file) != checksum:
            return (
                f"{file} does not match its {CHECKSUM} checksum (same size, other content: corrupt)"
            )
    return None


def clean_partial(run_dir: Path) -> list[str]:
    """Finish or remove what a killed :func:`write_checkpoint` left; return what was done.

    Call it only while holding the run directory's lock (no other writer).
    A temporary directory whose marker verifies is published if its step has no
    checkpoint (the kill came between the two renames of a rewrite); an ``.old``
    copy is put back if its step is missing; everything else is removed.
    """
    root = checkpoint_root(run_dir)
    if not root.is_dir():
        return []
    done = []
    partial = [(m, c) for c in root.iterdir() if (m := _PARTIAL_DIR.match(c.name))]
    # A finished .tmp copy is newer than an .old one of the same step: consider it first.
    for match, child in sorted(partial, key=lambda mc: (mc[0].group(2) != "tmp", mc[1].name)):
        final = root / f"step_{match.group(1)}"
        usable = (child / COMPLETE_MARKER).exists() and verify_checkpoint(child) is None
        if usable and not final.exists():
            child.rename(final)
            done.append(f"published {child.name} as {final.name}")
        else:
            shutil.rmtree(child, ignore_errors=True)
            done.append(f"removed {child.name}")
    return done


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
        for point in ("save_enospc", "save_mid", "save_sigterm", "save_sigterm_twice"):
            take_fault(point, step)  # a faults plugin acts here itself: raises, kills, signals
        _write_marker(tmp, step)
        if final.exists():  # a rerun of the same step replaces the old copy
            old = root / f".step_{step}.old-{os.getpid()}"
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final)
        _fsync(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
