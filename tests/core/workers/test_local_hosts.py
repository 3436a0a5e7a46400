"""In-process workers: a one-device pool's fused roles called without Ray."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
import torch.distributed as dist

from hfsdk import BuiltinProtocol, Worker, register
from hfsdk.core.batch import Batch
from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.colocation import colocate
from hfsdk.core.workers.errors import WorkerError
from hfsdk.core.workers.futures import CALL_CLOCK, CallFuture
from hfsdk.core.workers.local_hosts import LocalPool


class Doubler(Worker):
    def __init__(self, factor: int = 2) -> None:
        super().__init__()
        self.factor = factor

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def scale(self, batch: Batch) -> Batch:
        return Batch.from_dict(tensors={"y": batch["x"] * self.factor})

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO, blocking=False)
    def scale_later(self, batch: Batch) -> Batch:
        return self.scale(batch)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def where(self) -> tuple[int, int, Any, int, int, str | None]:
        group = dist.get_world_size() if dist.is_initialized() else -1
        return (os.getpid(), self.rank, self.device, group, torch.get_num_threads(),
                os.environ.get("HFSDK_TEST_FLAG"))  # fmt: skip

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def scale_in_place(self, batch: Batch) -> Batch:
        batch["x"].mul_(self.factor)  # changes the worker's copy only
        self.kept = batch
        return batch

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def touch_kept(self) -> None:
        self.kept["x"].zero_()

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def fail(self) -> None:
        raise ValueError("the worker refused")


class Summer(Worker):
    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def total(self, batch: Batch) -> Batch:
        return Batch.from_dict(tensors={"s": batch["y"].sum(dim=-1, keepdim=True)})


def test_fused_roles_run_in_this_process_and_leave_no_trace() -> None:
    before = (torch.get_num_threads(), os.environ.get("HFSDK_TEST_FLAG"))
    env = {"HFSDK_TEST_FLAG": "on", "OMP_NUM_THREADS": "1"}
    groups = colocate(
        LocalPool("global"), {"double": (Doubler, {"factor": 3}), "sum": Summer}, env_vars=env
    )
    try:
        pid, rank, device, world, threads, flag = groups["double"].where()[0]
        assert (pid, rank, str(device), world, threads, flag) == (os.getpid(), 0, "cpu", 1, 1, "on")
        batch = Batch.from_dict(tensors={"x": torch.arange(6.0).view(3, 2)})
        CALL_CLOCK.take()
        out = groups["double"].scale(batch)
        torch.testing.assert_close(out["y"], batch["x"] * 3)
        wall_s, busy_s, calls = CALL_CLOCK.take()
        assert calls == 1 and 0 < busy_s <= wall_s
        # A future hands the data to another role without the controller collecting it.
        future = groups["double"].scale_later(batch)
        assert isinstance(future, CallFuture) and future.done()
        totals = groups["sum"].total(future)
        torch.testing.assert_close(totals["s"], (batch["x"] * 3).sum(-1, keepdim=True))
        # Arguments and results are copies, as between processes.
        returned = groups["double"].scale_in_place(batch)
        torch.testing.assert_close(batch["x"], torch.arange(6.0).view(3, 2))
        groups["double"].touch_kept()
        torch.testing.assert_close(returned["x"], torch.arange(6.0).view(3, 2) * 3)
        with pytest.raises(WorkerError, match="ValueError: the worker refused") as info:
            groups["double"].fail()
        assert "raise ValueError" in info.value.worker_traceback
    finally:
        for group in groups.values():
            group.shutdown()
    assert not dist.is_initialized()
    assert (torch.get_num_threads(), os.environ.get("HFSDK_TEST_FLAG")) == before


def test_separate_roles_and_a_taken_process_group_are_refused() -> None:
    with pytest.raises(HfsdkError, match="colocate them fused"):
        colocate(LocalPool(), {"a": Doubler, "b": Summer}, fused=False)
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        with pytest.raises(HfsdkError, match="already initialised in this process"):
            colocate(LocalPool(), {"a": Doubler})
    finally:
        dist.destroy_process_group()
