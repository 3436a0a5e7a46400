"""What the planner knows about the hardware: devices, memory, compute and links.

Bandwidths are per device and per direction, in bytes per second; the
simulator derives collective times from them. Two presets ship: ``a100-80gb``
(DGX-A100-like nodes) and ``local`` (this machine's CPU cores as virtual
devices, measured when the preset is asked for).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import attrs

from hfsdk.core.errors import HfsdkError

GIB = 1024**3


def _positive(_inst: object, attr: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
        raise HfsdkError(
            f"cluster field {attr.name!r} must be a positive number, got {value!r}; "
            "give it in base units (bytes, FLOP/s, bytes/s, seconds)"
        )


def _positive_int(_inst: object, attr: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HfsdkError(f"cluster field {attr.name!r} must be an integer >= 1, got {value!r}")


def _fraction(_inst: object, attr: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, int | float) and 0 < value <= 1):
        raise HfsdkError(f"cluster field {attr.name!r} must be in (0, 1], got {value!r}")


@attrs.frozen(kw_only=True)
class Cluster:
    """A homogeneous cluster: ``nodes`` x ``devices_per_node`` identical devices.

    ``intra_node_bandwidth`` is what one device can push to a peer in its node
    (NVLink); ``inter_node_bandwidth`` is one device's share of its node's
    network (one NIC per GPU on DGX-like nodes). ``usable_memory_fraction``
    leaves room for the framework, allocator fragmentation and buffers.
    """

    name: str = "custom"
    device_kind: str = "gpu"
    nodes: int = attrs.field(default=1, validator=_positive_int)
    devices_per_node: int = attrs.field(default=8, validator=_positive_int)
    device_memory: float = attrs.field(default=80e9, validator=_positive)
    peak_flops: float = attrs.field(default=312e12, validator=_positive)
    memory_bandwidth: float = attrs.field(default=2.0e12, validator=_positive)
    intra_node_bandwidth: float = attrs.field(default=300e9, validator=_positive)
    inter_node_bandwidth: float = attrs.field(default=25e9, validator=_positive)
    intra_node_latency: float = attrs.field(default=10e-6, validator=_positive)
    inter_node_latency: float = attrs.field(default=30e-6, validator=_positive)
    usable_memory_fraction: float = attrs.field(default=0.9, validator=_fraction)

    @property
    def num_devices(self) -> int:
        """Devices in the whole cluster."""
        return self.nodes * self.devices_per_node

    @property
    def usable_memory(self) -> float:
        """Bytes per device the planner may fill with model state."""
        return self.device_memory * self.usable_memory_fraction

    def link(self, span: int) -> tuple[float, float]:
        """(bandwidth, latency) of a collective whose ranks lie within ``span`` devices.

        Pools are laid out on consecutive devices, so a group spanning no more
        than one node's devices talks over the intra-node links.
        """
        if span <= self.devices_per_node:
            return self.intra_node_bandwidth, self.intra_node_latency
        return self.inter_node_bandwidth, self.inter_node_latency

    def with_devices(self, num_devices: int) -> Cluster:
        """The same hardware with ``num_devices`` devices in total.

        Up to one node's worth fits on a single (partial) node; more must fill
        whole nodes, because pools are spread over identical nodes.
        """
        if isinstance(num_devices, bool) or not isinstance(num_devices, int) or num_devices < 1:
            raise HfsdkError(f"device count must be an integer >= 1, got {num_devices!r}")
        if num_devices <= self.devices_per_node:
            return attrs.evolve(self, nodes=1, devices_per_node=num_devices)
        if num_devices % self.devices_per_node:
            lower = num_devices - num_devices % self.devices_per_node
            raise HfsdkError(
                f"{num_devices} devices do not fill whole nodes of {self.devices_per_node} "
                f"on cluster {self.name!r}; ask for a multiple of {self.devices_per_node} "
                f"(e.g. {lower} or {lower + self.devices_per_node}) or at most "
                f"{self.devices_per_node}"
            )
        return attrs.evolve(self, nodes=num_devices // self.devices_per_node)


def a100_80gb() -> Cluster:
    """DGX-A100-like nodes: 8 x A100-80GB SXM, NVLink 600 GB/s, 8 x 200 Gb/s InfiniBand.

    One node by default; ``with_devices`` scales it to the requested size.
    """
    return Cluster(
        name="a100-80gb",
        device_kind="gpu",
        nodes=1,
        devices_per_node=8,
        device_memory=80e9,
        peak_flops=312e12,  # dense bf16
        memory_bandwidth=2.039e12,
        intra_node_bandwidth=300e9,  # 600 GB/s NVLink, bidirectional
        inter_node_bandwidth=25e9,  # one 200 Gb/s HDR NIC per GPU
        intra_node_latency=10e-6,
        inter_node_latency=30e-6,
        usable_memory_fraction=0.9,
    )


def _physical_memory() -> float:
    """Total RAM in bytes (POSIX sysconf; falls back to 8 GiB where unavailable)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return float(8 * GIB)


def _usable_cores() -> int:
    """CPU cores this process may run on (affinity-aware where the OS says)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def local() -> Cluster:
    """This machine: one virtual device per usable CPU core, RAM split evenly.

    Read at call time. Compute and bandwidth figures are rough per-core values
    for a modern x86 server core (AVX-512 fp32 matmuls, shared-memory gloo);
    they only need to rank layouts sensibly on a CPU-only machine.
    """
    cores = _usable_cores()
    return Cluster(
        name="local",
        device_kind="cpu",
        nodes=1,
        devices_per_node=cores,
        device_memory=_physical_memory() / cores,
        peak_flops=100e9,
        memory_bandwidth=10e9,
        intra_node_bandwidth=5e9,
        inter_node_bandwidth=5e9,
        intra_node_latency=50e-6,
        inter_node_latency=50e-6,
        usable_memory_fraction=0.7,
    )


PRESETS: dict[str, Callable[[], Cluster]] = {"a100-80gb": a100_80gb, "local": local}
"""Cluster presets by name; each call builds a fresh description."""


def get_cluster(name: str | Cluster) -> Cluster:
    """A preset by name (``a100-80gb``, ``local``) or a :class:`Cluster` as is."""
    if isinstance(name, Cluster):
        return name
    factory = PRESETS.get(str(name).strip().lower())
    if factory is None:
        raise HfsdkError(
            f"unknown cluster preset {name!r}; available: {', '.join(sorted(PRESETS))} "
            "(or build a hfsdk.core.placement.Cluster with your hardware's numbers)"
        )
    return factory()


def detect_cluster() -> Cluster:
    """This machine as the planner sees it: its CUDA devices if any, else :func:`local`.

    With CUDA the device count and memory are read from the devices; the
    compute and link figures are the ``a100-80gb`` preset's (set
    ``placement.cluster`` to a preset, or build a :class:`Cluster`, when they
    differ much). Imports torch, so only the trainer calls it.
    """
    import torch

    if not torch.cuda.is_available():
        return local()
    props = torch.cuda.get_device_properties(0)
    name = str(props.name).lower().replace(" ", "-")
    return attrs.evolve(
        a100_80gb(),
        name=f"detected-{name}",
        devices_per_node=torch.cuda.device_count(),
        device_memory=float(props.total_memory),
    )


def resolve_cluster(name: str | Cluster) -> Cluster:
    """``auto`` detects this machine (:func:`detect_cluster`); anything else is a preset name."""
    if isinstance(name, str) and name.strip().lower() == "auto":
        return detect_cluster()
    return get_cluster(name)
