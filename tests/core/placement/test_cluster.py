"""Cluster descriptions and presets."""

from __future__ import annotations

import os

import attrs
import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk.core.placement.cluster import Cluster, a100_80gb, get_cluster, local


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
