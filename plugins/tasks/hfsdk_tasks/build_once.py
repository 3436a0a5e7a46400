"""A directory of built task assets, made once and renamed into place.

Every built-in task that builds its model, tokenizer or data on first use (the
default task, the agent tasks, the vision task) keeps them under the cache in a
directory that is either complete or absent: the build writes into a fresh staging
directory beside it and renames that into place, so a build interrupted half-way
leaves nothing where a reader looks, and of two processes building at once the
first to finish wins and the other uses its result.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Hide the progress bars transformers and datasets print while saving small files
    (a CLI error during a first build stays one line)."""
    import datasets
    from transformers.utils import logging as hf_logging

    datasets_were_on = datasets.is_progress_bar_enabled()
    hf_was_on = hf_logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if datasets_were_on:
            datasets.enable_progress_bars()
        if hf_was_on:
            hf_logging.enable_progress_bar()


STALE_STAGING_S = 3600.0
"""A staging directory untouched this long, whose build holds no lock on it, was left by a
killed build and is removed."""


def build_once(
    final: Path, build: Callable[[Path], object], *, complete: Callable[[Path], bool]
) -> Path:
    """``final``, made by ``build(staging)`` unless ``complete(final)`` already holds.

    ``build`` writes everything into the empty ``staging`` directory (progress bars
    hidden); ``complete`` says whether a directory holds a finished build (typically:
    the file ``build`` writes last exists). A ``final`` that exists but is not complete
    (a file deleted after the build) is removed with a warning and built again. The
    directory gets the process's umask (``0755`` under the usual ``022``), so a cache
    shared between users stays readable. Staging directories left by killed builds
    (``.{name}.building-*``, untouched for :data:`STALE_STAGING_S` and not locked by a
    running build) are removed first.
    """
    if complete(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and _remove_damaged(final, complete):
        return final  # another process's build was completed meanwhile
    _remove_stale_staging(final)
    staging, lock = _make_staging(final)
    try:
        with quiet_progress_bars():
            build(staging)
        try:
            os.rename(staging, final)
        except OSError:
            if not complete(final):  # not another process's finished build: a real failure
                raise
    finally:
        os.close(lock)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final


def _remove_damaged(final: Path, complete: Callable[[Path], bool]) -> bool:
    """Remove the incomplete ``final``; ``True`` when it turns out complete after all.

    Only a finished build is renamed into place, so a directory there that is not complete
    was damaged afterwards, and the rename of a new build cannot replace it (it is not
    empty). Another process may be doing the same and rename its finished build in
    meanwhile: ``final`` is checked again, and moved aside (atomic) before it is deleted,
    so a complete build moved aside by mistake is put back rather than deleted.
    """
    if complete(final):
        return True
    log.warning("cache %s is incomplete; rebuilding it", final)
    aside = final.parent / f".{final.name}.damaged-{secrets.token_hex(8)}"
    try:
        os.rename(final, aside)
    except FileNotFoundError:
        return False  # another process removed it first
    if complete(aside):  # another process's build, renamed in between our checks
        with contextlib.suppress(OSError):  # a third build is in place already: keep that one
            os.rename(aside, final)
    shutil.rmtree(aside, ignore_errors=True)
    return complete(final)


def _make_staging(final: Path) -> tuple[Path, int]:
    """A new, empty staging directory beside ``final``, and a file descriptor holding an
    ``flock`` on it (while held, :func:`_remove_stale_staging` leaves it alone)."""
    while True:
        staging = final.parent / f".{final.name}.building-{secrets.token_hex(8)}"
        try:
            # Not tempfile.mkdtemp (0700, and renamed into place it would stay owner-only):
            # mkdir applies the umask itself, so nothing reads the process-wide umask.
            staging.mkdir(mode=0o777)
        except FileExistsError:
            continue
        fd = os.open(staging, os.O_RDONLY)
        with contextlib.suppress(OSError):  # no flock here (some network filesystems): age only
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return staging, fd


def _remove_stale_staging(final: Path) -> None:
    """Remove ``final``'s staging (and damaged, moved-aside) directories that killed
    builds left behind."""
    cutoff = time.time() - STALE_STAGING_S
    name = glob.escape(final.name)
    left = [*final.parent.glob(f".{name}.building-*"), *final.parent.glob(f".{name}.damaged-*")]
    for staging in left:
        try:
            if _last_modified(staging) > cutoff:
                continue
            fd = os.open(staging, os.O_RDONLY)
        except OSError:
            continue  # gone already, or not ours to read
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a running build holds it
        except OSError:
            pass  # no flock on this filesystem: its age alone says it is abandoned
        finally:
            os.close(fd)
        log.warning("removing %s, left by a build that did not finish", staging)
        shutil.rmtree(staging, ignore_errors=True)


def _last_modified(directory: Path) -> float:
    """The newest modification time of ``directory`` and everything under it."""
    newest = directory.stat().st_mtime
    for root, dirs, files in os.walk(directory):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                newest = max(newest, os.stat(os.path.join(root, name)).st_mtime)
    return newest


def holds(marker: str) -> Callable[[Path], bool]:
    """``complete`` for :func:`build_once`: the directory holds the file ``marker``."""
    return lambda directory: (directory / marker).is_file()
