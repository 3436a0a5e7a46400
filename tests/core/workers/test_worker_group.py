"""Worker groups on Ray: every protocol end to end, futures, data futures, errors.

One Ray instance and two long-lived groups serve the module: ``actor`` (4
ranks, meshes ``train`` = 2 x 2 tp x dp and ``pipe`` = 2 x 2 pp x tp) and
``critic`` (2 ranks). A test plugin installed as a real distribution adds the
``odd_ranks_sum`` protocol.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import torch

from hfsdk import Batch, BuiltinProtocol, ResourcePool, Worker, WorkerGroup, register
from hfsdk.core.errors import HfsdkError, UnknownNameError
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk.core.workers.errors import WorkerDiedError, WorkerError, WorkerTimeoutError
from hfsdk.core.workers.futures import CallFuture
from hfsdk.core.workers.ray_runtime import connect, shutdown

from ...conftest import make_distribution

pytestmark = pytest.mark.distributed

PROTOCOL_PLUGIN = """
import hfsdk
from hfsdk.core.workers.protocols import DispatchPlan


def odd_dispatch(ctx, args, kwargs):
    return DispatchPlan(calls={r: (args, kwargs) for r in range(1, ctx.world_size, 2)})


def sum_collect(results, spec):
    return sum(results)


@hfsdk.hookimpl
def hfsdk_register_transfer_protocols(register):
    register("odd_ranks_sum", (odd_dispatch, sum_collect))
"""

# ---------------------------------------------------------------------- tripwire

FETCHED_ON_DRIVER: list[int] = []


def _rebuild_tripwire(driver_pid: int) -> Tripwire:
    if os.getpid() == driver_pid:
        FETCHED_ON_DRIVER.append(driver_pid)
    return Tripwire(driver_pid)


class Tripwire:
    """Unpickling it in the driver process is recorded: proof the data went through it."""

    def __init__(self, driver_pid: int) -> None:
        self.driver_pid = driver_pid

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_tripwire, (self.driver_pid,))


# ---------------------------------------------------------------------- workers


@attrs.frozen(kw_only=True)
class ProbeConfig:
    scale: int = 1


def square(x: torch.Tensor) -> torch.Tensor:
    return x * x


class ProbeWorker(Worker):
    """Records the rows each rank receives and tags its output rows with its rank."""

    def __init__(self, config: ProbeConfig) -> None:
        super().__init__()
        self.config = config
        self.received: dict[str, list[int]] = {}
        self.calls: dict[str, int] = {}
        self.declare_mesh("train", tp=2)  # 2 x 2 tp x dp
        self.declare_mesh("pipe", pp=2, tp=2)  # 2 x 2 pp x tp, dp 1

    def _take(self, name: str, batch: Batch) -> Batch:
        self.received[name] = batch["x"].tolist()
        self.calls[name] = self.calls.get(name, 0) + 1
        rank = torch.full((len(batch),), self.rank)
        return Batch.from_dict({"x": batch["x"], "y": batch["x"] * self.config.scale, "rank": rank})

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def whoami(self) -> tuple[int, int, int, int, str, int]:
        return (
            self.rank,
            self.world_size,
            self.local_rank,
            self.local_world_size,
            str(self.device),
            self.config.scale,
        )

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def nap(self, seconds: float) -> int:
        time.sleep(seconds * (self.rank + 1))
        return self.rank

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def received_rows(self, name: str) -> list[int] | None:
        return self.received.get(name)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def call_counts(self) -> dict[str, int]:
        return dict(self.calls)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def all_reduce(self, value: float) -> float:
        import torch.distributed as dist

        tensor = torch.tensor([value + self.rank])
        dist.all_reduce(tensor, group=self.process_group)
        return float(tensor.item())

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def dp_sum_over_device_mesh(self) -> float:
        import torch.distributed as dist

        mesh = self.device_mesh((2, 2), ("dp", "tp"))  # rank = 2 * dp + tp
        tensor = torch.tensor([float(self.rank)])
        dist.all_reduce(tensor, group=mesh.get_group("dp"))
        return float(tensor.item())

    @register(protocol=BuiltinProtocol.ALL_TO_ALL)
    def add_rank(self, value: int) -> int:
        return value + 100 * self.rank

    @register(protocol=BuiltinProtocol.RANK_ZERO)
    def only_zero(self, text: str) -> tuple[int, str]:
        self.calls["only_zero"] = self.calls.get("only_zero", 0) + 1
        return self.rank, text

    @register(protocol=BuiltinProtocol.DP_COMPUTE)
    def suffix(self, words: list[str], mark: str) -> list[str]:
        return [f"{w}{mark}{self.rank}" for w in words]

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def compute(self, batch: Batch) -> Batch:
        return self._take("compute", batch)

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO_WITH_FUNC)
    def apply(self, fn: Any, batch: Batch) -> Batch:
        out = self._take("apply", batch)
        out["y"] = fn(batch["x"])
        return out

    @register(protocol=BuiltinProtocol.DP_COMPUTE_METRIC)
    def metrics(self, batch: Batch) -> dict[str, float]:
        return {"xsum": float(batch["x"].sum()), "rank": self.rank, "rows": len(batch)}

    @register(protocol=BuiltinProtocol.MESH_PROTO, mesh="train")
    def mesh_compute(self, batch: Batch) -> Batch:
        return self._take("mesh_compute", batch)

    @register(protocol=BuiltinProtocol.MESH_PROTO, mesh="pipe")
    def pipe_compute(self, batch: Batch) -> Batch:
        return self._take("pipe_compute", batch)

    @register(protocol=BuiltinProtocol.MESH_PROTO, mesh="undeclared")
    def no_mesh(self, batch: Batch) -> Batch:
        return batch

    @register(protocol="odd_ranks_sum")
    def value(self, x: int) -> int:
        self.calls["value"] = self.calls.get("value", 0) + 1
        return x * (self.rank + 1)

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO, blocking=False)
    def slow_compute(self, batch: Batch, seconds: float) -> Batch:
        time.sleep(seconds)
        return self._take("slow_compute", batch)

    def _produce(self, batch: Batch, driver_pid: int, fail_rank: int) -> Batch:
        if self.rank == fail_rank:
            raise RuntimeError(f"producer rank {self.rank} broke")
        out = self._take("produce", batch)
        out.non_tensors["trip"] = Batch.from_dict(
            non_tensors={"t": [Tripwire(driver_pid) for _ in range(len(batch))]}
        )["t"]
        return out

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO, blocking=False)
    def produce(self, batch: Batch, driver_pid: int, fail_rank: int = -1) -> Batch:
        return self._produce(batch, driver_pid, fail_rank)

    @register(protocol=BuiltinProtocol.MESH_PROTO, mesh="train", blocking=False)
    def produce_mesh(self, batch: Batch, driver_pid: int, fail_rank: int = -1) -> Batch:
        return self._produce(batch, driver_pid, fail_rank)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def fail_on(self, rank: int) -> int:
        if self.rank == rank:
            raise ValueError(f"boom on rank {rank}")
        return self.rank


class ConsumerWorker(Worker):
    """Consumes batches handed over from the actor group."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[int] = []

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def consume(self, batch: Batch) -> Batch:
        self.received = batch["x"].tolist()
        crank = torch.full((len(batch),), self.rank)
        return Batch.from_dict({"x": batch["x"], "z": batch["y"] + 1, "crank": crank})

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def received_rows(self) -> list[int]:
        return self.received

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def total(self, batch: Batch) -> int:
        return int(batch["y"].sum())

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO, blocking=False)
    def emit(self, batch: Batch) -> Batch:
        return Batch.from_dict({"x": batch["x"], "crank": torch.full((len(batch),), self.rank)})


class FragileWorker(Worker):
    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def sleep(self, seconds: float) -> int:
        time.sleep(seconds)
        return self.rank

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def exit_on(self, rank: int) -> int:
        if self.rank == rank:
            os._exit(3)
        return self.rank

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def raise_or_reduce(self, rank: int) -> float:
        if self.rank == rank:
            raise KeyError("no such key")
        import torch.distributed as dist

        tensor = torch.ones(1)
        dist.all_reduce(tensor)  # blocks: the raising rank never joins
        return float(tensor.item())


class TypoWorker(Worker):
    @register(protocol="dp_compute_prot")
    def compute(self, batch: Batch) -> Batch:
        return batch


# ---------------------------------------------------------------------- fixtures


def rows(n: int) -> Batch:
    return Batch.from_dict({"x": torch.arange(n)})


@pytest.fixture(scope="module")
def ray_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    plugin_dir = tmp_path_factory.mktemp("protocol_plugin")
    make_distribution(
        plugin_dir,
        "hfsdk-test-protocols",
        "testprotocols",
        "hfsdk_test_protocols",
        PROTOCOL_PLUGIN,
    )
    sys.path.insert(0, str(plugin_dir))
    importlib.invalidate_caches()
    reset_plugin_manager()
    os.environ["OMP_NUM_THREADS"] = "1"
    connect(num_cpus=2, virtual_devices=8, object_store_memory=256 * 2**20)
    try:
        yield
    finally:
        shutdown()
        sys.path.remove(str(plugin_dir))
        reset_plugin_manager()


@pytest.fixture(scope="module")
def actor(ray_runtime: None) -> Iterator[WorkerGroup]:
    pool = ResourcePool(4, name="actor-pool")
    group = WorkerGroup(ProbeWorker, pool, role="actor", kwargs={"config": ProbeConfig(scale=3)})
    yield group
    group.shutdown()
    pool.release()


@pytest.fixture(scope="module")
def critic(ray_runtime: None) -> Iterator[WorkerGroup]:
    pool = ResourcePool(2, name="critic-pool")
    group = WorkerGroup(ConsumerWorker, pool, role="critic", call_timeout_s=60.0)
    yield group
    group.shutdown()
    pool.release()


# ---------------------------------------------------------------------- the group itself


def test_workers_know_rank_world_local_rank_device_and_config(actor: WorkerGroup) -> None:
    assert actor.whoami() == [(r, 4, r, 4, "cpu", 3) for r in range(4)]
    assert len({info["pid"] for info in actor.process_info}) == 4
    assert not hasattr(actor, "_take")  # only registered methods are bound


def test_torch_distributed_spans_the_group(actor: WorkerGroup) -> None:
    # (1 + 0) + (1 + 1) + (1 + 2) + (1 + 3) on every rank.
    assert actor.all_reduce(1.0) == [10.0] * 4
    # A DeviceMesh over the group (what FSDP2 shards over): dp groups are {0, 2} and {1, 3}.
    assert actor.dp_sum_over_device_mesh() == [2.0, 4.0, 2.0, 4.0]


# ---------------------------------------------------------------------- protocols


def test_one_to_all_all_to_all_and_rank_zero(actor: WorkerGroup) -> None:
    assert actor.add_rank([1, 2, 3, 4]) == [1, 102, 203, 304]
    before = [c.get("only_zero", 0) for c in actor.call_counts()]
    assert actor.only_zero("hi") == (0, "hi")
    after = [c.get("only_zero", 0) for c in actor.call_counts()]
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 0, 0, 0]


def test_dp_compute_splits_plain_lists(actor: WorkerGroup) -> None:
    words = [f"w{i}" for i in range(6)]
    assert actor.suffix(words, "-") == ["w0-0", "w1-0", "w2-1", "w3-1", "w4-2", "w5-3"]


def test_dp_compute_proto_pads_splits_and_unpads(actor: WorkerGroup) -> None:
    out = actor.compute(rows(10))
    assert out["x"].tolist() == list(range(10))
    assert out["y"].tolist() == [3 * i for i in range(10)]
    assert out["rank"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    # The two padding rows (copies of rows 0 and 1) went to rank 3 and were dropped.
    assert actor.received_rows("compute") == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 0, 1]]


def test_dp_compute_proto_with_func_sends_the_function_to_every_rank(actor: WorkerGroup) -> None:
    out = actor.apply(square, rows(8))
    assert out["y"].tolist() == [i * i for i in range(8)]
    assert actor.received_rows("apply") == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_dp_compute_metric_averages_the_ranks(actor: WorkerGroup) -> None:
    # Chunks of 8 rows: sums 1, 5, 9, 13 -> mean 7; ranks 0..3 -> 1.5; 2 rows each.
    assert actor.metrics(rows(8)) == {"xsum": 7.0, "rank": 1.5, "rows": 2.0}


def test_mesh_proto_on_a_tp_by_dp_mesh(actor: WorkerGroup) -> None:
    out = actor.mesh_compute(rows(5))
    # dp 0 = ranks 0, 1 (tp 0, 1); dp 1 = ranks 2, 3; 5 rows padded to 6.
    assert actor.received_rows("mesh_compute") == [[0, 1, 2], [0, 1, 2], [3, 4, 0], [3, 4, 0]]
    assert out["x"].tolist() == [0, 1, 2, 3, 4]
    assert out["rank"].tolist() == [0, 0, 0, 2, 2]  # only tp rank 0 of each dp rank answers


def test_mesh_proto_collects_only_the_last_pipeline_stage(actor: WorkerGroup) -> None:
    out = actor.pipe_compute(rows(3))
    assert actor.received_rows("pipe_compute") == [[0, 1, 2]] * 4
    assert out["rank"].tolist() == [2, 2, 2]  # pp rank 1, tp rank 0


def test_mesh_protocol_without_a_declared_mesh_is_explained(actor: WorkerGroup) -> None:
    with pytest.raises(HfsdkError, match=r"ranks \[0, 1, 2, 3\] did not declare mesh"):
        actor.no_mesh(rows(4))


def test_custom_protocol_from_a_plugin(actor: WorkerGroup) -> None:
    before = [c.get("value", 0) for c in actor.call_counts()]
    assert actor.value(5) == 5 * 2 + 5 * 4  # ranks 1 and 3 only
    after = [c.get("value", 0) for c in actor.call_counts()]
    assert [a - b for a, b in zip(after, before, strict=True)] == [0, 1, 0, 1]
    from hfsdk import get_registry

    assert get_registry("transfer_protocols")["odd_ranks_sum"].plugin == "testprotocols"


@pytest.mark.parametrize("timeouts", [{"call_timeout_s": 0}, {"start_timeout_s": -1.0}])
def test_bad_timeouts_fail_before_any_process_starts(actor: WorkerGroup, timeouts: dict) -> None:
    name = next(iter(timeouts))
    with pytest.raises(HfsdkError, match=f"{name}=.*expected seconds > 0"):
        WorkerGroup(ProbeWorker, actor.pool, role="bad", **timeouts)
    assert [len(slot.hosts) for slot in actor.pool.slots] == [1, 1, 1, 1]


def test_unknown_protocol_fails_before_any_process_starts(actor: WorkerGroup) -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'dp_compute_proto'"):
        WorkerGroup(TypoWorker, actor.pool, role="typo")


# ---------------------------------------------------------------------- futures


def test_non_blocking_call_returns_a_future(actor: WorkerGroup) -> None:
    start = time.monotonic()
    future = actor.slow_compute(rows(4), 1.0)
    assert isinstance(future, CallFuture)
    assert time.monotonic() - start < 0.9
    with pytest.raises(WorkerTimeoutError) as info:
        future.result(timeout=0.1)
    assert info.value.ranks == [0, 1, 2, 3]
    assert future.result()["x"].tolist() == [0, 1, 2, 3]
    assert future.done()


def test_blocking_calls_feed_the_controller_overhead_clock(actor: WorkerGroup) -> None:
    actor.clock.take()
    started = time.perf_counter()
    assert actor.nap(0.2) == [0, 1, 2, 3]
    wall = time.perf_counter() - started
    calls_s, busy_s, calls = actor.clock.take()
    assert calls == 1
    # The slowest rank slept 0.8 s; the rest of the call's wall time is the controller's.
    assert 0.8 <= busy_s <= calls_s <= wall + 1e-6
    actor.nap.submit(0.0).result()  # futures are not counted (they may overlap)
    assert actor.clock.take()[2] == 0


def test_blocking_methods_can_be_submitted(actor: WorkerGroup) -> None:
    future = actor.compute.submit(rows(4))
    assert future.result()["y"].tolist() == [0, 3, 6, 9]


def test_data_future_same_shard_count_moves_worker_to_worker(
    actor: WorkerGroup, critic: WorkerGroup
) -> None:
    FETCHED_ON_DRIVER.clear()
    # mesh "train" has dp 2: two shards for the critic's two ranks; 9 rows pad to 10.
    future = actor.produce_mesh(rows(9), os.getpid())
    out = critic.consume(future)
    assert future._infos is None  # the controller did not even wait for the producer
    assert out["x"].tolist() == list(range(9))
    assert out["z"].tolist() == [3 * i + 1 for i in range(9)]
    assert out["crank"].tolist() == [0] * 5 + [1] * 4
    assert critic.received_rows() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 0]]
    assert FETCHED_ON_DRIVER == []


def test_data_future_regrouped_for_another_size(actor: WorkerGroup, critic: WorkerGroup) -> None:
    FETCHED_ON_DRIVER.clear()
    future = actor.produce(rows(10), os.getpid())  # 4 shards of 3 rows, 2 padding rows
    out = critic.consume(future)
    assert out["z"].tolist() == [3 * i + 1 for i in range(10)]
    assert critic.received_rows() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert critic.total(future) == [3 * sum(range(10))] * 2  # whole value on every rank
    assert FETCHED_ON_DRIVER == []
    # Control: fetching the result on the controller does trip the wire, once per fetched
    # row: 4 shards of 3 rows (the 2 padding rows are dropped after the fetch).
    assert future.result()["x"].tolist() == list(range(10))
    assert len(FETCHED_ON_DRIVER) == 12


def test_data_future_from_a_smaller_group_is_padded_for_a_larger_one(
    actor: WorkerGroup, critic: WorkerGroup
) -> None:
    future = critic.emit(rows(10))
    out = actor.compute(future)
    assert out["x"].tolist() == list(range(10))
    assert actor.received_rows("compute") == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 0, 1]]


def test_failed_producer_is_reported_through_the_consumer(
    actor: WorkerGroup, critic: WorkerGroup
) -> None:
    # Regrouping waits for the producer's row counts, so its failure surfaces at dispatch.
    with pytest.raises(WorkerError, match=r"role 'actor' rank 2 .* method 'produce'"):
        critic.consume(actor.produce(rows(8), os.getpid(), fail_rank=2))
    # Shard-to-shard hand-over: the consuming worker finds the failure itself.
    with pytest.raises(WorkerError) as info:
        critic.consume(actor.produce_mesh(rows(8), os.getpid(), fail_rank=2))
    assert info.value.role == "critic"
    assert "input from actor.produce_mesh rank 2" in str(info.value)
    assert "producer rank 2 broke" in str(info.value)


# ---------------------------------------------------------------------- errors


def test_worker_exception_names_role_rank_method_and_traceback(actor: WorkerGroup) -> None:
    with pytest.raises(WorkerError) as info:
        actor.fail_on(2)
    error = info.value
    assert (error.role, error.rank, error.method, error.exc_type) == (
        "actor",
        2,
        "fail_on",
        "ValueError",
    )
    assert "boom on rank 2" in str(error)
    assert "in fail_on" in error.worker_traceback
    assert f"pid {actor.process_info[2]['pid']}" in str(error)
    assert actor.fail_on(-1) == [0, 1, 2, 3]  # the group keeps working


def test_timeouts_and_a_dead_worker_are_reported(ray_runtime: None) -> None:
    pool = ResourcePool(2, name="fragile")
    group = WorkerGroup(FragileWorker, pool, role="fragile", call_timeout_s=1.0)
    try:
        # Each worker interrupts the call at the deadline and says where it hung.
        with pytest.raises(WorkerTimeoutError) as hung:
            group.sleep(60.0)
        first = str(hung.value).splitlines()[0]
        assert "role 'fragile' rank 0 (pid" in first and "method 'sleep'" in first, first
        assert "did not finish within 1 s" in first and "in sleep" in first, first
        assert "time.sleep(seconds)" in str(hung.value)
        assert group.sleep(0.0) == [0, 1]  # the interrupted workers still answer
        # A worker that cannot report (the deadline ignored) is caught by the controller's wait.
        with pytest.raises(WorkerTimeoutError, match=r"ranks \[0, 1\] did not finish within"):
            group.sleep.submit(60.0).result(timeout=1.0)
        start = time.monotonic()
        with pytest.raises(WorkerDiedError) as info:
            group.exit_on.submit(1).result(timeout=60)
        assert time.monotonic() - start < 30
        error = info.value
        assert (error.role, error.rank, error.method) == ("fragile", 1, "exit_on")
        assert "exit" in error.cause.lower()
        assert "died during method 'exit_on'" in str(error)
    finally:
        group.shutdown()
        pool.release()


def test_error_is_raised_while_other_ranks_wait_in_a_collective(ray_runtime: None) -> None:
    pool = ResourcePool(2, name="stuck")
    group = WorkerGroup(FragileWorker, pool, role="stuck")
    try:
        start = time.monotonic()
        with pytest.raises(WorkerError) as info:
            group.raise_or_reduce(1)  # rank 0 blocks in all_reduce forever
        assert time.monotonic() - start < 30
        assert (info.value.rank, info.value.exc_type) == (1, "KeyError")
    finally:
        group.shutdown()  # kills the rank stuck in the collective
        pool.release()
