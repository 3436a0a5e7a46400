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
from hfsdk.core.workers.futures import CallFuture
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
        groups["double"].clock.take()
        out = groups["double"].scale(batch)
        torch.testing.assert_close(out["y"], batch["x"] * 3)
        wall_s, busy_s, calls = groups["double"].clock.take()
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


def test_a_second_role_refused_by_the_pool_leaves_the_environment_as_it_was() -> None:
    pool = LocalPool("taken")
    groups = colocate(pool, {"a": Summer}, init_distributed=False)
    threads, flag = torch.get_num_threads(), os.environ.get("HFSDK_TEST_FLAG")
    env = {"HFSDK_TEST_FLAG": "refused", "OMP_NUM_THREADS": str(threads + 1)}
    try:
        with pytest.raises(HfsdkError, match="already holds roles"):
            colocate(pool, {"b": Summer}, init_distributed=False, env_vars=env)
        # Before: the refused role's variables and thread count stayed set.
        assert (torch.get_num_threads(), os.environ.get("HFSDK_TEST_FLAG")) == (threads, flag)
    finally:
        for group in groups.values():
            group.shutdown()


class Hanger(Worker):
    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def hang(self, seconds: float) -> None:
        import time

        time.sleep(seconds)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def quick(self) -> int:
        return 7

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def quieten(self) -> None:
        import logging

        # What an engine such as vLLM does in its constructor.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        os.environ["OMP_NUM_THREADS"] = "3"
        logging.getLogger("hfsdk_test_engine").addFilter(logging.Filter("nothing"))
        logging.getLogger().addFilter(logging.Filter("nothing"))
        # vLLM's CPU worker: threads bound, then torch.set_num_threads made a no-op.
        torch.set_num_threads(2)
        torch.set_num_threads = lambda _count: None


def test_a_hung_in_process_call_is_interrupted_with_role_method_and_stack() -> None:
    from hfsdk.core.workers.errors import WorkerTimeoutError

    groups = colocate(LocalPool("hang"), {"actor": Hanger}, call_timeout_s=0.5)
    try:
        with pytest.raises(WorkerTimeoutError) as info:
            groups["actor"].hang(60.0)
        first = str(info.value).splitlines()[0]
        assert "role 'actor' rank 0" in first and "method 'hang'" in first
        assert "did not finish within 0.5 s" in first
        assert "test_local_hosts.py" in first and "in hang" in first  # where it hung
        assert "time.sleep(seconds)" in info.value.worker_traceback
        assert info.value.ranks == [0]
        assert groups["actor"].quick() == [7]  # the interrupted host still answers
    finally:
        groups["actor"].shutdown()


def test_kill_restores_environment_and_logging_filters_an_engine_changed() -> None:
    import logging

    env_before = dict(os.environ)
    root_filters = list(logging.getLogger().filters)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        groups = colocate(LocalPool("leak"), {"engine": Hanger}, env_vars={"OMP_NUM_THREADS": "1"})
        groups["engine"].quieten()
        assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
        assert torch.get_num_threads() == 2
        groups["engine"].shutdown()
        # torch's own function is back, and with it the count from before the pool
        assert torch.set_num_threads is torch._C.set_num_threads
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads = torch._C.set_num_threads
        torch.set_num_threads(threads)
    assert dict(os.environ) == env_before
    assert logging.getLogger().filters == root_filters
    assert logging.getLogger("hfsdk_test_engine").filters == []
