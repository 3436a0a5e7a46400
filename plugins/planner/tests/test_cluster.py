"""Cluster descriptions and presets."""

from __future__ import annotations

import functools
import os

import attrs
import pytest

from hfsdk import HfsdkError
from hfsdk_planner.cluster import Cluster, a100_80gb, local
from hfsdk_planner.cluster_lookup import get_cluster


def test_a100_preset_numbers() -> None:
    cluster = get_cluster("a100-80gb")
    assert (cluster.nodes, cluster.devices_per_node, cluster.num_devices) == (1, 8, 8)
    assert cluster.device_memory == 80e9
    assert cluster.usable_memory == pytest.approx(72e9)
    assert cluster.peak_flops == 312e12
    assert cluster.intra_node_bandwidth > cluster.inter_node_bandwidth


def test_local_preset_reads_this_machine() -> None:
    cluster = get_cluster("LOCAL")
    cores = len(os.sched_getaffinity(0))
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert cluster.device_kind == "cpu"
    assert cluster.num_devices == cores
    assert cluster.device_memory * cores == pytest.approx(ram)


def test_local_preset_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2})
    assert local().num_devices == 3


def test_with_devices() -> None:
    cluster = a100_80gb()
    assert cluster.with_devices(128).nodes == 16
    assert cluster.with_devices(128).num_devices == 128
    small = cluster.with_devices(4)
    assert (small.nodes, small.devices_per_node) == (1, 4)
    with pytest.raises(HfsdkError, match=r"multiple of 8 \(e.g. 16 or 24\)"):
        cluster.with_devices(20)
    with pytest.raises(HfsdkError, match="integer >= 1"):
        cluster.with_devices(0)


def test_pool_nodes_spread_a_pool_evenly_over_the_fewest_nodes() -> None:
    gpus = a100_80gb()  # 8 devices per node
    assert [gpus.pool_nodes(d) for d in (1, 8, 12, 16, 20, 64)] == [1, 1, 2, 2, 4, 8]
    assert local().pool_nodes(64) == 1  # a CPU profile's devices share one machine


def test_links_by_span() -> None:
    cluster = a100_80gb().with_devices(16)
    assert cluster.link(8) == (cluster.intra_node_bandwidth, cluster.intra_node_latency)
    assert cluster.link(9) == (cluster.inter_node_bandwidth, cluster.inter_node_latency)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("nodes", 0, "integer >= 1"),
        ("device_memory", -1.0, "positive number"),
        ("peak_flops", float("inf"), "positive number"),
        ("usable_memory_fraction", 1.5, r"in \(0, 1\]"),
    ],
)
def test_bad_fields(field: str, value: object, message: str) -> None:
    with pytest.raises(HfsdkError, match=f"{field}.*{message}"):
        Cluster(**{field: value})
    with pytest.raises(HfsdkError, match=field):
        attrs.evolve(a100_80gb(), **{field: value})


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(
        HfsdkError, match=r"unknown cluster preset 'h100'.*a100-80gb, h100-80gb, h200-141gb, local"
    ):
        get_cluster("h100")


def test_gpu_presets_carry_their_data_sheet_figures() -> None:
    h100, h200 = get_cluster("h100-80gb"), get_cluster("h200-141gb")
    assert (h100.device_memory, h200.device_memory) == (80e9, 141e9)
    assert h100.peak_flops == h200.peak_flops == 989.4e12
    assert (h100.memory_bandwidth, h200.memory_bandwidth) == (3.35e12, 4.8e12)
    assert "data sheet" in h100.source and "H200" in h200.source
    assert h100.for_dtype("float32").peak_flops == 66.9e12
    assert h100.for_dtype("bf16").peak_flops == 989.4e12
    assert local().for_dtype("float32") == local()  # nothing measured: the peak stays


def test_presets_come_through_the_hook_and_a_plugin_adds_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hfsdk
    from hfsdk.core import plugin_manager
    from hfsdk_planner.cluster_lookup import cluster_presets

    class TestClusters:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_clusters(register):  # type: ignore[no-untyped-def]
            register("lab-4x", lambda: Cluster(name="lab-4x", devices_per_node=4))

    from hfsdk_planner import plugin as planner

    pm = plugin_manager.build_plugin_manager(
        [("planner", planner), ("lab", TestClusters)], load_entry_points=False
    )
    monkeypatch.setattr(plugin_manager, "get_plugin_manager", functools.cache(lambda: pm))
    assert {"a100-80gb", "h100-80gb", "h200-141gb", "local", "lab-4x"} <= set(cluster_presets())
    assert pm.registry("clusters")["h200-141gb"].plugin == "planner"
    assert pm.registry("clusters")["lab-4x"].plugin == "lab"
    assert get_cluster("lab-4x").devices_per_node == 4


def test_a_profile_round_trips_and_is_accepted_by_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from hfsdk.core.trainer.placement_config import PlacementConfig

    profile = attrs.evolve(
        local(),
        name="measured",
        flops_by_dtype={"float32": 5e10, "bfloat16": 1e11},
        layer_overhead=2e-4,
        efficiency={"training_efficiency": 0.3},
    )
    path = tmp_path / "local.yaml"
    profile.save(path)
    assert get_cluster(str(path)) == profile
    assert get_cluster(str(path)).for_dtype("float32").peak_flops == 5e10
    assert PlacementConfig(cluster=str(path)).cluster == str(path)
    figures = "device_memory: 1.0e+9\npeak_flops: 1.0e+10\nmemory_bandwidth: 1.0e+10\n"
    path.write_text(f"name: x\npeak_flop: 1\n{figures}")
    with pytest.raises(HfsdkError, match=r"unknown keys \['peak_flop'\]"):
        get_cluster(str(path))
    # Before: an empty or partial profile planned on the A100 data sheet's figures.
    for text in ("", "# measured later\n", "name: x\npeak_flops: 1.0e+10\n"):
        path.write_text(text)
        with pytest.raises(HfsdkError, match="has no device_memory"):
            get_cluster(str(path))
    path.write_text(f"{figures}decode_overlap: 'false'\n")
    with pytest.raises(HfsdkError, match="'decode_overlap' must be true or false"):
        get_cluster(str(path))
    path.write_text(f"{figures}devices_per_node: 1000000000\n")  # the search never ended
    with pytest.raises(HfsdkError, match="the planner searches at most 16384"):
        get_cluster(str(path))
    with pytest.raises(HfsdkError, match="the planner searches at most 16384"):
        a100_80gb().with_devices(1_000_000)
    with pytest.raises(HfsdkError, match="does not exist; write one with `hfsdk calibrate"):
        get_cluster(str(tmp_path / "missing.yaml"))


def test_a_zero_rate_under_by_threads_is_refused_by_its_own_name() -> None:
    # Before: accepted, and only `--threads 2` failed, naming the top-level peak_flops.
    with pytest.raises(HfsdkError, match=r"'by_threads' \(2 threads\): 'peak_flops' must be a n"):
        attrs.evolve(local(), by_threads={2: {"peak_flops": 0}})
    with pytest.raises(HfsdkError, match=r"\(2 threads\): 'flops.float32' must be a number > 0"):
        attrs.evolve(local(), by_threads={2: {"flops.float32": 0}})
    profile = attrs.evolve(local(), by_threads={2: {"layer_overhead": 0}})  # no overhead: fine
    assert profile.for_threads(2).layer_overhead == 0


def test_efficiency_of_a_profile_sets_the_simulator() -> None:
    from hfsdk_planner.simulator import Simulator

    cluster = attrs.evolve(local(), efficiency={"training_efficiency": 0.25})
    assert Simulator(cluster).settings.training_efficiency == 0.25
    with pytest.raises(HfsdkError, match="unknown keys \\['speed'\\]"):
        Simulator(attrs.evolve(local(), efficiency={"speed": 0.5}))


def test_executor_overheads_follow_the_process_and_the_sharding() -> None:
    """Calls to a worker process cost the remote call overhead; only roles sharded over
    several ranks pay the backend's remote (two-rank) fixed costs."""
    base = attrs.evolve(
        local(),
        update_overhead=0.01,
        microbatch_overhead=0.002,
        forward_overhead=0.001,
        call_overhead=0.0003,
        remote_update_overhead=0.0,
        remote_microbatch_overhead=0.04,
        remote_forward_overhead=0.011,
        remote_call_overhead=0.014,
    )
    backend = ("update_overhead", "microbatch_overhead", "forward_overhead")

    def figures(cluster: Cluster) -> tuple[float, ...]:
        return (*(getattr(cluster, f) for f in backend), cluster.call_overhead)

    assert figures(base.for_executor(True)) == (0.01, 0.002, 0.001, 0.0003)
    assert figures(base.for_executor(False)) == (0.0, 0.04, 0.011, 0.014)  # sharded by default
    # one device in a worker process (e.g. the actor beside a rollout pool)
    assert figures(base.for_executor(False, sharded=False)) == (0.01, 0.002, 0.001, 0.014)


def test_a_hand_written_profile_may_give_figures_as_80e9(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # PyYAML reads 80e9 (no dot, no exponent sign) as the text '80e9'.
    path = tmp_path / "cluster.yaml"
    path.write_text("device_memory: 80e9\npeak_flops: 312e12\nmemory_bandwidth: 2e12\n")
    cluster = Cluster.load(path)
    assert (cluster.device_memory, cluster.peak_flops, cluster.memory_bandwidth) == (
        80e9,
        312e12,
        2e12,
    )
    # Text that is no number is still refused, naming the field.
    path.write_text("device_memory: 80GB\npeak_flops: 312e12\nmemory_bandwidth: 2e12\n")
    with pytest.raises(HfsdkError, match="'device_memory' must be a positive number, got '80GB'"):
        Cluster.load(path)


def test_device_kind_is_lower_cased_and_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    figures = "device_memory: 12e9\npeak_flops: 6e10\nmemory_bandwidth: 1.7e10\n"
    upper = tmp_path / "upper.yaml"
    upper.write_text(f"device_kind: CPU\ndevices_per_node: 2\n{figures}")
    # Upper case is still a CPU profile: one node, priced per thread count.
    assert Cluster.load(upper).device_kind == "cpu"
    assert Cluster.load(upper).pool_nodes(2) == 1
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(f"device_kind: tpu\n{figures}")
    with pytest.raises(HfsdkError) as info:
        Cluster.load(wrong)
    message = str(info.value)
    assert str(wrong) in message and "'device_kind' must be 'cpu' or 'gpu'" in message
    assert "'tpu'" in message and "\n" not in message


def test_flops_by_dtype_keys_take_the_short_dtype_names() -> None:
    cluster = Cluster(flops_by_dtype={"BF16": 1e12, "fp32": 2e11})
    assert cluster.flops_by_dtype == (("bfloat16", 1e12), ("float32", 2e11))
    assert cluster.for_dtype("bfloat16").peak_flops == 1e12
    per_thread = Cluster(by_threads={2: {"flops_by_dtype": {"bf16": 3e12}}})
    assert per_thread.for_threads(2).for_dtype("bfloat16").peak_flops == 3e12
    with pytest.raises(
        HfsdkError, match=r"'flops_by_dtype' gives bfloat16 twice \(bf16 and bfloat16"
    ):
        Cluster(flops_by_dtype={"bf16": 1e12, "bfloat16": 2e12})


@pytest.mark.parametrize("devices", [6, 7, 64])
def test_more_cpu_devices_than_cores_share_the_hosts_memory(devices: int) -> None:
    # Before: 64 devices on a 2-core profile became 32 "nodes" of the host, i.e. 32x its
    # memory (and 7 was refused as not filling whole nodes).
    host = attrs.evolve(local(), nodes=1, devices_per_node=2, device_memory=6e9)
    more = host.with_devices(devices)
    assert more.num_devices == devices and more.nodes == 1
    assert more.device_memory * devices == pytest.approx(12e9)
    assert host.with_devices(1).device_memory == 6e9  # within the cores: as before


def test_no_fit_on_a_cpu_profile_does_not_ask_for_more_devices() -> None:
    from hfsdk_planner import plan_for_algorithm

    with pytest.raises(HfsdkError) as info:
        plan_for_algorithm("grpo", model_size="70B", cluster=local(), num_devices=2)
    assert "more devices" not in str(info.value)
    assert "smaller models" in str(info.value)
