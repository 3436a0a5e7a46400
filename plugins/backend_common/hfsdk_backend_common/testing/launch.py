"""Run a function on N local gloo processes and collect what each returns (tests, benchmarks).

``target`` is ``"module:function"``; it is called as ``function(rank, world, **kwargs)``
after ``torch.distributed`` is initialised, and its return value (picklable)
comes back in rank order. ``path`` entries are put on ``sys.path`` first (for
test helpers that are not installed modules).
"""

from __future__ import annotations

import importlib
import os
import pickle
import sys
import traceback
from typing import Any

from hfsdk import HfsdkError


def _child(
    rank: int, world: int, port: int, target: str, kwargs: dict, path: list[str], queue: Any
) -> None:
    import torch
    import torch.distributed as dist

    try:
        sys.path[:0] = path
        torch.set_num_threads(1)
        store = dist.TCPStore("127.0.0.1", port, is_master=False)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
        module, name = target.split(":")
        result = getattr(importlib.import_module(module), name)(rank, world, **kwargs)
        # Plain pickle: the queue's own pickler shares tensor storage through this
        # process's file descriptors, which vanish when it exits before the parent reads.
        queue.put((rank, True, pickle.dumps(result)))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # the parent re-raises it with the rank
        queue.put((rank, False, traceback.format_exc()))


def run_gloo(
    world: int,
    target: str,
    kwargs: dict | None = None,
    *,
    path: list[str] | None = None,
    timeout: float = 600,
) -> list[Any]:
    """Run ``target`` on ``world`` gloo ranks; return each rank's result in rank order."""
    import multiprocessing as mp

    import torch.distributed as dist

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    # The parent holds the rendezvous store on a port the OS picked and bound at once: no
    # window in which another process could take a port chosen beforehand.
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    port = store.port
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    procs = [
        ctx.Process(target=_child, args=(r, world, port, target, kwargs or {}, path or [], queue))
        for r in range(world)
    ]
    for proc in procs:
        proc.start()
    results: dict[int, Any] = {}
    try:
        for _ in range(world):
            rank, ok, value = queue.get(timeout=timeout)
            if not ok:
                raise HfsdkError(f"rank {rank} of {target} failed:\n{value}")
            results[rank] = pickle.loads(value)
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return [results[r] for r in range(world)]
