"""Keep freed CPU memory in the process, so a training step's large tensors reuse it.

glibc's ``malloc`` serves a large request (above its mmap threshold, at most
32 MiB) with fresh pages from the kernel and gives them back on ``free``. A
training step on CPU allocates and frees tensors of that size many times
(one (tokens, vocabulary) float32 tensor of the compute-bound benchmark is
33.5 MiB), so every one of them is first-touched again: the kernel zeroes
its pages at the few GB/s that ``hfsdk calibrate`` reports as "writing fresh
allocations". Serving every request from the heap and never trimming it
makes the second and later uses of that memory free. The cost is that the
process keeps its peak: the memory it freed stays resident for reuse instead
of going back to the system (measured in docs/benchmarks.md).

Only glibc is tuned, and only where the user has not tuned it: any
``MALLOC_*`` environment variable (glibc's own tunables, e.g.
``MALLOC_TRIM_THRESHOLD_=131072``, its default trim threshold) or a
preloaded allocator (``LD_PRELOAD``, e.g. jemalloc or tcmalloc) leaves
``malloc`` as it is.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_MAX = -4
_NEVER_TRIM = 2**31 - 1  # the largest value mallopt's int takes

_applied: bool | None = None


def user_tuned_allocator() -> bool:
    """Whether the environment already chooses how ``malloc`` behaves."""
    return bool(os.environ.get("LD_PRELOAD")) or any(
        name.startswith("MALLOC_") for name in os.environ
    )


def keep_freed_cpu_memory() -> bool:
    """Make this process's ``malloc`` reuse freed memory (once per process); whether it does."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if user_tuned_allocator():
        logger.debug("malloc left as the environment set it")
        return False
    libc = ctypes.CDLL(None)
    # mallopt returns 1 on success; both or neither (a half-tuned heap helps nothing).
    _applied = bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM)
    )
    return _applied
