"""Atomic file writes: a reader sees the old file or the whole new one, also after a power cut.

The data goes to a temporary file in the target's directory, which is flushed
and ``fsync``-ed, renamed over the target, and then the directory itself is
``fsync``-ed so that the rename is on disk too (a rename alone can be lost
with the directory entry, leaving the old file or none after a crash).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


def fsync_dir(directory: str | Path) -> None:
    """Flush ``directory``'s entries (a rename or a new file in it) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; it replaces ``path`` on success.

    For writers that take a file name (``torch.save``, ``safetensors.save_file``,
    ``DataFrame.to_parquet``): the file they write is fsync-ed, renamed over
    ``path`` and the directory fsync-ed. On an exception the temporary file is
    removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Named, not created (mkstemp's file would be 0600): the writer creates it with the umask.
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        yield tmp
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (see the module docstring)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically and durably (see the module docstring)."""
    write_bytes_atomic(path, text.encode(encoding))
