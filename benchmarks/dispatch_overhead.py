"""Controller-side cost of worker-group calls, and what data futures save.

Table 1: a ``DP_COMPUTE_PROTO`` call of an identity method (the batch goes to
the workers and comes back) for a tiny "no-op" batch, 1 MB and 64 MB, on 1, 2
and 4 workers: the median time to dispatch and submit (controller only) and
the median blocking call (dispatch, transfer, run, collect).

Table 2: a producer group makes a batch of the given size on its workers and a
consumer group of the same size reduces it, once through the controller
(``consumer.consume(producer.make(...))``) and once as a data future
(``consumer.consume(producer.make.submit(...))``), which the consumer's
workers fetch themselves. One more row hands 4 producer shards to 2 consumers
(the regrouping path).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dispatch_overhead.py

Starts a local Ray instance with 8 virtual devices; all on CPU.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from hfsdk import Batch, BuiltinProtocol, ResourcePool, Worker, WorkerGroup, register
from hfsdk.core.workers.ray_runtime import connect, shutdown

ROW_FLOATS = 1024  # one row = 4 KiB of float32
PAYLOADS = {"no-op": None, "1 MB": 2**20, "64 MB": 64 * 2**20}


class EchoWorker(Worker):
    """Identity, producer and consumer methods for the measurements."""

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def echo(self, batch: Batch) -> Batch:
        return batch

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def make(self, index: Batch) -> Batch:
        rows = len(index)
        return Batch.from_dict({"data": torch.ones(rows, ROW_FLOATS), "index": index["index"]})

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def consume(self, batch: Batch) -> Batch:
        return Batch.from_dict({"total": batch["data"].sum(dim=1)})


def rows_for(payload: int | None, workers: int) -> int:
    """Rows for a payload (a multiple of the worker count); no-op = one row per worker."""
    if payload is None:
        return workers
    rows = payload // (ROW_FLOATS * 4)
    return max(workers, rows - rows % workers)


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm up: first calls import modules in the workers
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def echo(group: WorkerGroup, batch: Batch) -> Batch:
    return group.echo(batch)


def submit_ms(group: WorkerGroup, batch: Batch, repeats: int) -> float:
    """Median time to dispatch and submit; each call is drained (untimed) before the next."""
    group.echo(batch)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        future = group.echo.submit(batch)
        times.append(time.perf_counter() - start)
        future.result()  # keep the object store from filling up with pending calls
    return 1000 * statistics.median(times)


def via_controller(producer: WorkerGroup, consumer: WorkerGroup, index: Batch) -> Batch:
    return consumer.consume(producer.make(index))


def via_future(producer: WorkerGroup, consumer: WorkerGroup, index: Batch) -> Batch:
    return consumer.consume(producer.make.submit(index))


def call_table(repeats: int, worker_counts: list[int]) -> list[tuple[str, int, float, float]]:
    out = []
    for n in worker_counts:
        with ResourcePool(n, name=f"echo{n}") as pool:
            group = WorkerGroup(EchoWorker, pool, role="echo", init_distributed=False)
            try:
                for label, payload in PAYLOADS.items():
                    rows = rows_for(payload, n)
                    width = 1 if payload is None else ROW_FLOATS
                    batch = Batch.from_dict({"data": torch.ones(rows, width)})
                    submit = submit_ms(group, batch, repeats)
                    total = median_ms(functools.partial(echo, group, batch), repeats)
                    out.append((label, n, submit, total))
            finally:
                group.shutdown()
    return out


def future_table(repeats: int, pairs: list[tuple[int, int]]) -> list[tuple[str, str, float, float]]:
    out = []
    for producers, consumers in pairs:
        with (
            ResourcePool(producers, name="producer") as ppool,
            ResourcePool(consumers, name="consumer") as cpool,
        ):
            producer = WorkerGroup(EchoWorker, ppool, role="producer", init_distributed=False)
            consumer = WorkerGroup(EchoWorker, cpool, role="consumer", init_distributed=False)
            try:
                for label, payload in PAYLOADS.items():
                    if payload is None:
                        continue
                    rows = rows_for(payload, producers * consumers)
                    index = Batch.from_dict({"index": torch.arange(rows)})
                    args = (producer, consumer, index)
                    controller = median_ms(functools.partial(via_controller, *args), repeats)
                    future = median_ms(functools.partial(via_future, *args), repeats)
                    out.append((label, f"{producers} -> {consumers}", controller, future))
            finally:
                producer.shutdown()
                consumer.shutdown()
    return out


def main() -> None:
    """Measure and print both tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per cell")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    connect(virtual_devices=8, object_store_memory=1536 * 2**20)
    try:
        calls = call_table(args.repeats, args.workers)
        pairs = [(n, n) for n in args.workers] + [(4, 2)]
        futures = future_table(args.repeats, pairs)
    finally:
        shutdown()

    print(f"\nDP_COMPUTE_PROTO identity call, median of {args.repeats} (ms)")
    print(f"{'payload':>8} {'workers':>7} {'dispatch+submit':>16} {'blocking call':>14}")
    for label, n, submit, total in calls:
        print(f"{label:>8} {n:>7} {submit:>16.2f} {total:>14.2f}")

    print(f"\nproducer -> consumer hand-over, median of {args.repeats} (ms)")
    print(f"{'payload':>8} {'groups':>7} {'via controller':>15} {'data future':>12} {'saved':>7}")
    for label, groups, controller, future in futures:
        saved = 100 * (1 - future / controller)
        print(f"{label:>8} {groups:>7} {controller:>15.2f} {future:>12.2f} {saved:>6.0f}%")


if __name__ == "__main__":
    main()
