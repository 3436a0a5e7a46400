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
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


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


def build_once(
    final: Path, build: Callable[[Path], object], *, complete: Callable[[Path], bool]
) -> Path:
    """``final``, made by ``build(staging)`` unless ``complete(final)`` already holds.

    ``build`` writes everything into the empty ``staging`` directory (progress bars
    hidden); ``complete`` says whether a directory holds a finished build (typically:
    the file ``build`` writes last exists).
    """
    if complete(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.building-", dir=final.parent))
    try:
        with quiet_progress_bars():
            build(staging)
        try:
            os.rename(staging, final)
        except OSError:
            if not complete(final):  # not another process's finished build: a real failure
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final


def holds(marker: str) -> Callable[[Path], bool]:
    """``complete`` for :func:`build_once`: the directory holds the file ``marker``."""
    return lambda directory: (directory / marker).is_file()
