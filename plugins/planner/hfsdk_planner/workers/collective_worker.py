"""One rank of a two-process all-reduce / all-gather measurement; rank 0 prints JSON.

``python -m hfsdk_planner.workers.collective_worker RANK PORT NBYTES REPEATS BACKEND``
(``gloo`` or ``nccl``): ``{"small": s, "large": s, "gather": s}``, the best
seconds of a two-float all-reduce, an ``NBYTES`` all-reduce and an all-gather
into ``NBYTES``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable


def measure(rank: int, port: str, nbytes: int, repeats: int, backend: str) -> dict[str, float]:
    """Time the collectives between this rank and its peer (both must call this)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    cuda = backend == "nccl"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(rank)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def timed(op: Callable[[], object], n: int) -> float:
        op()
        dist.barrier()
        sync()
        best = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(n):
                op()
            sync()
            best.append((time.perf_counter() - start) / n)
        return min(best)

    tiny = torch.zeros(2, device=device)
    full = torch.zeros(nbytes // 4, device=device)
    half = torch.zeros(nbytes // 8, device=device)
    small = timed(lambda: dist.all_reduce(tiny), 20)
    # Interleaved, so that both see the same load: their ratio is what is kept.
    large, gather = [], []
    for _ in range(3):
        large.append(timed(lambda: dist.all_reduce(full), 2))
        gather.append(timed(lambda: dist.all_gather_into_tensor(full, half), 2))
    dist.destroy_process_group()
    return {"small": small, "large": min(large), "gather": min(gather)}


def main(argv: list[str]) -> None:
    """Run one rank; rank 0 prints the result as one JSON line."""
    rank = int(argv[0])
    result = measure(rank, argv[1], int(argv[2]), int(argv[3]), argv[4])
    if rank == 0:
        print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
