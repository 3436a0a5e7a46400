"""One single-thread process copying a buffer for a while; prints its bytes/s.

``python -m hfsdk_planner.workers.copy_worker NBYTES SECONDS``: several run at
once to measure the memory bus the CPU cores share.
"""

from __future__ import annotations

import sys
import time


def copy_rate(nbytes: int, seconds: float) -> float:
    """Bytes/s read and written by ``dst.copy_(src)`` on one thread, repeated for ``seconds``.

    Torch's thread count is put back afterwards: called in a process that later
    builds an in-process vLLM engine, a changed count makes vLLM's CPU attention
    abort (its metadata and its kernel disagree on the thread count).
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        src = torch.empty(nbytes // 4).uniform_()
        dst = torch.empty_like(src)
        dst.copy_(src)  # first touch outside the timed stretch
        copies, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            dst.copy_(src)
            copies += 1
        return 2 * nbytes * copies / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)


def main(argv: list[str]) -> None:
    """Print the copy rate for ``NBYTES SECONDS``."""
    print(copy_rate(int(argv[0]), float(argv[1])))


if __name__ == "__main__":
    main(sys.argv[1:])
