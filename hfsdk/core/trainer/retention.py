"""Which checkpoints a run keeps: the last ``keep_last``, plus the best by a validation metric.

``trainer.keep_last: 0`` keeps every checkpoint (the default). With
``trainer.keep_best: val/pass@1`` the checkpoint of the step with the highest
logged value of that metric is kept as well (the metric is logged at the step
a validation ran; the best step must also have a checkpoint, so validate on
save steps). The newest checkpoint is never removed, so resuming is unaffected.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hfsdk.core.trainer.checkpoint import COMPLETE_MARKER, complete_checkpoints

log = logging.getLogger(__name__)


def best_step(rows: Sequence[dict[str, Any]], metric: str, steps: set[int]) -> int | None:
    """The step in ``steps`` with the highest ``metric`` (the earliest of equal ones)."""
    best: tuple[float, int] | None = None
    for row in rows:
        step, value = row.get("step"), row.get(metric)
        numeric = isinstance(value, (int, float)) and value == value  # NaN ranks nowhere
        if step in steps and numeric and (best is None or value > best[0]):
            best = (float(value), int(step))
    return None if best is None else best[1]


def _remove(path: Path, step: int) -> None:
    """Unmark, rename (``clean_partial`` removes it) and delete: no kill brings it back."""
    (path / COMPLETE_MARKER).unlink(missing_ok=True)  # else clean_partial republished it
    doomed = path.rename(path.with_name(f".step_{step}.tmp-{os.getpid()}"))
    shutil.rmtree(doomed, ignore_errors=True)


def prune_checkpoints(
    run_dir: Path, rows: Sequence[dict[str, Any]], keep_last: int, keep_best: str | None, step: int
) -> list[int]:
    """Remove the checkpoints retention does not keep; returns the removed steps. ``step``'s
    (just written) is kept, later ones (a run resumed before them) are left: counted, they
    made keep_last remove the checkpoint just written and keep a damaged one."""
    if keep_last <= 0:
        return []
    checkpoints = [c for c in sorted(complete_checkpoints(run_dir)) if c[0] <= step]
    steps = [s for s, _ in checkpoints]
    keep = set(steps[-keep_last:])
    if keep_best is not None:  # None (no step has the metric yet) keeps nothing more
        keep.add(best_step(rows, keep_best, set(steps)))
    removed = [s for s in steps if s not in keep]
    for step in removed:
        _remove(dict(checkpoints)[step], step)
    if removed:
        log.info(
            "removed checkpoints %s (keep_last=%d, keep_best=%s)", removed, keep_last, keep_best
        )
    return removed
