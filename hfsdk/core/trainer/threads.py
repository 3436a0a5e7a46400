"""How many intra-op threads a run's workers use: decided here, read by the run and placement.

Kept free of torch so that ``hfsdk plan`` can ask it without importing the stack.
"""

from __future__ import annotations

import os


def available_cores() -> int:
    """CPU cores this process may run on (its affinity set when the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def worker_threads(configured: int, device_slots: int, cores: int | None = None) -> int:
    """Intra-op threads per worker process: ``configured``, or each device slot's share of cores.

    Workers on different devices run at the same time, so they split the
    cores; roles colocated on one device take turns, so each gets the whole
    share. ``OMP_NUM_THREADS`` in the controller's environment caps the
    automatic value (tests and shared machines set it to 1). The session
    starts its workers with this count and placement plugins price a run's
    devices at it (``trainer.worker_threads``, docs/placement.md).
    """
    if configured > 0:
        return configured
    share = max(1, (cores or available_cores()) // max(1, device_slots))
    cap = os.environ.get("OMP_NUM_THREADS", "")
    if cap.isdigit() and int(cap) > 0:
        share = min(share, int(cap))
    return share
