"""What the planner knows about the hardware: devices, memory, compute and links.

Bandwidths are per device and per direction, in bytes per second; the
simulator derives collective times from them. Presets are registry entries
(``hfsdk_register_clusters``); the core ships ``a100-80gb``, ``h100-80gb`` and
``h200-141gb`` (DGX-like nodes, figures from NVIDIA's data sheets) and
``local`` (this machine's CPU cores as virtual devices, read when asked for).
A cluster profile is a YAML file of these fields (``hfsdk calibrate`` writes
one from measurements); wherever a preset name is accepted, so is its path.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HfsdkError

GIB = 1024**3


def _number(value: Any) -> Any:
    """A numeric string as its float, anything else as it is (the validators judge it).

    PyYAML reads ``80e9`` (no dot, no exponent sign) as text, though YAML 1.2
    and the hand that wrote it mean a number.
    """
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _positive(_inst: object, attr: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
        raise HfsdkError(
            f"cluster field {attr.name!r} must be a positive number, got {value!r}; "
            "give it in base units (bytes, FLOP/s, bytes/s, seconds)"
        )


MAX_DEVICES = 16384
"""The most devices a cluster may have: the search walks every device count of every group,
and past this it would run for minutes (8,192 devices take about 8 s)."""


def _positive_int(_inst: object, attr: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HfsdkError(f"cluster field {attr.name!r} must be an integer >= 1, got {value!r}")


def _string(_inst: object, attr: attrs.Attribute, value: str) -> None:
    # A YAML list or number here would only fail later, far from the file.
    if not isinstance(value, str):
        raise HfsdkError(
            f"cluster field {attr.name!r} must be a string, got {value!r}; give the profile a "
            "plain name (e.g. name: my-cluster)"
        )


def _bool(_inst: object, attr: attrs.Attribute, value: bool) -> None:
    if not isinstance(value, bool):
        raise HfsdkError(f"cluster field {attr.name!r} must be true or false, got {value!r}")


def _non_negative(_inst: object, attr: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, int | float) and value >= 0 and math.isfinite(value)):
        raise HfsdkError(
            f"cluster field {attr.name!r} must be a number >= 0 (seconds), got {value!r}"
        )


def _pairs_of(field: str, example: str) -> Callable[[Any], tuple[tuple[str, float], ...]]:
    """The converter of cluster field ``field``: ``{name: number}`` (or pairs) -> sorted
    ``((name, number), ...)``, hashable and stable; anything else is an error naming the
    field (a converter is not told which field it converts)."""

    def pairs(value: Any) -> tuple[tuple[str, float], ...]:
        items = value.items() if isinstance(value, Mapping) else value
        try:
            return tuple(sorted((str(k), float(v)) for k, v in items))
        except (TypeError, ValueError) as exc:
            raise HfsdkError(
                f"cluster field {field!r} must be a mapping of names to numbers (e.g. "
                f"{example}), got {value!r} ({exc}); give one or leave the field out"
            ) from None

    return pairs


def _dtype_name(name: str) -> str:
    """A dtype as :meth:`Cluster.for_dtype` looks it up: lower case, short names
    (``bf16``, ``fp32``) spelled out through :data:`DTYPE_ALIASES`."""
    key = str(name).strip().lower()
    return DTYPE_ALIASES.get(key, key)


def _dtype_pairs(value: Any) -> tuple[tuple[str, float], ...]:
    """``flops_by_dtype``'s converter: the names to numbers of :func:`_pairs_of`, each dtype
    under its full name (``{bf16: ...}`` must match a ``bfloat16`` run, not be skipped)."""
    out: dict[str, float] = {}
    named: dict[str, str] = {}
    for name, number in _pairs_of("flops_by_dtype", "{bfloat16: 312e12}")(value):
        key = _dtype_name(name)
        if key in out:
            raise HfsdkError(
                f"cluster field 'flops_by_dtype' gives {key} twice ({named[key]} and {name} "
                "name the same dtype); keep one of them"
            )
        out[key], named[key] = number, name
    return tuple(sorted(out.items()))


DEVICE_KINDS = ("cpu", "gpu")
"""The device kinds the planner prices: CPU cores (one node, per-thread figures) or GPUs."""


def _device_kind(value: Any) -> Any:
    """``device_kind`` in lower case (``CPU`` is a CPU); anything else as it is."""
    return value.strip().lower() if isinstance(value, str) else value


def _check_device_kind(_inst: object, attr: attrs.Attribute, value: Any) -> None:
    if value not in DEVICE_KINDS:
        raise HfsdkError(
            f"cluster field {attr.name!r} must be 'cpu' or 'gpu', got {value!r}; give cpu "
            "for a profile of CPU cores (hfsdk calibrate) or gpu for accelerators"
        )


def _positive_pairs(_inst: object, attr: attrs.Attribute, value: tuple) -> None:
    for key, number in value:
        if not (number > 0 and math.isfinite(number)):
            raise HfsdkError(
                f"cluster field {attr.name!r}: {key!r} must be a positive number, got {number!r}"
            )


THREAD_FIELDS = (
    "peak_flops",
    "memory_bandwidth",
    "layer_overhead",
    "token_overhead",
)
"""The scalar fields a CPU profile measures per thread count (besides the per-dtype peaks,
``flops.<dtype>``, and the achieved fractions, ``efficiency.<name>``)."""


def _by_threads(value: Any) -> tuple[tuple[int, tuple[tuple[str, float], ...]], ...]:
    """``{threads: {field: number}}`` -> sorted hashable pairs; nested per-dtype peaks and
    fractions (``flops_by_dtype: {...}``, ``efficiency: {...}``) become dotted keys."""
    items = value.items() if isinstance(value, Mapping) else value
    out = []
    try:
        for threads, figures in items:
            flat: dict[str, float] = {}
            figures = dict(figures)
            for key, number in figures.items():
                if key == "flops_by_dtype":
                    # The same dtype names as the top level's (bf16 is bfloat16).
                    flat.update({f"flops.{k}": v for k, v in _dtype_pairs(number)})
                elif key == "efficiency":
                    flat.update({f"efficiency.{k}": float(v) for k, v in dict(number).items()})
                else:
                    flat[str(key)] = float(number)
            out.append((int(threads), tuple(sorted(flat.items()))))
    except (TypeError, ValueError) as exc:
        raise HfsdkError(
            f"cluster field 'by_threads' must map thread counts to {{field: number}}, got "
            f"{value!r} ({exc})"
        ) from None
    return tuple(sorted(out))


def _check_by_threads(_inst: object, attr: attrs.Attribute, value: tuple) -> None:
    allowed = set(THREAD_FIELDS)
    for threads, figures in value:
        if threads < 1:
            raise HfsdkError(f"cluster field 'by_threads': thread count {threads} must be >= 1")
        for key, number in figures:
            known = key in allowed or key.startswith(("flops.", "efficiency."))
            if not known:
                raise HfsdkError(
                    f"cluster field 'by_threads' ({threads} threads): unknown key {key!r}; "
                    f"allowed: {', '.join(THREAD_FIELDS)}, flops_by_dtype, efficiency"
                )
            overhead = key.endswith("_overhead")  # as at the top level: 0 is no overhead
            if not (math.isfinite(number) and (number >= 0 if overhead else number > 0)):
                raise HfsdkError(
                    f"cluster field 'by_threads' ({threads} threads): {key!r} must be a "
                    f"number {'>= 0' if overhead else '> 0'}, got {number!r}"
                )


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

    ``peak_flops`` is the matmul throughput of the compute dtype the presets
    assume (bf16 on GPUs); ``flops_by_dtype`` adds measured or quoted figures
    per dtype (``float32``, ``bfloat16``), which :meth:`for_dtype` selects.
    ``layer_overhead`` is the fixed time one transformer layer's forward call
    costs besides its FLOPs and bytes (kernel launches, the framework's
    per-op dispatch), plus ``token_overhead`` per sequence in a decode step
    (the per-token work besides the weight matmuls: attention over the
    cache, norms, sampling); ``update_overhead`` is a training backend's fixed
    work per optimizer step (hooks, clipping, optimizer and metric bookkeeping),
    ``microbatch_overhead`` its fixed work per training micro-batch (the loss
    terms' small ops, autograd bookkeeping) and ``forward_overhead`` per
    inference micro-batch (log-probs, values); these three describe
    in-process workers (one-device runs) and their ``remote_`` twins workers
    sharded over several processes (the calibration's two-device Ray runs),
    which :meth:`for_executor` selects; ``hfsdk calibrate`` fits all six from
    short runs of the real training backend;
    ``reshard_overhead`` is the fixed work of one train -> generate transition of
    sharded weights besides its gathers and copies (building the generation
    module, the per-unit bookkeeping), fitted from the same runs on two devices;
    ``call_overhead`` is the controller's fixed cost per
    call to in-process workers (one-device runs), ``remote_call_overhead`` per
    call to worker processes (Ray); both include moving a rollout-sized batch.
    ``shared_memory_bandwidth``: CPU cores share their node's memory bus, so
    this is the node's total when every device copies at once (0: each
    device has its own memory, as GPUs do); :meth:`bandwidth_per_device`.
    ``fresh_memory_bandwidth``: bytes/s written into a new allocation, whose pages
    the OS maps on first touch (CPUs: large buffers come fresh from the OS each
    time; 0: allocations reuse memory, as GPUs' caching allocators do).
    ``decode_overlap``: a decode step's weight reads and matmuls overlap, so
    it costs the larger of the two (a GPU's roofline, the presets); a
    calibrated profile says ``False``: its fit adds them, as one CPU thread
    that first streams the weights and then multiplies does.
    ``efficiency`` overrides the simulator's achieved fractions of the peaks
    (``SimulatorSettings`` field names); a calibrated profile carries the
    fractions it measured. ``by_threads``: a CPU profile's figures per
    thread count above one (``{2: {peak_flops: ..., flops_by_dtype: {...},
    memory_bandwidth: ..., layer_overhead: ..., token_overhead: ...,
    efficiency: {...}}}``; the top level is one thread's), which
    :meth:`for_threads` selects for the threads a run's device really uses.
    ``peaks_measured``: the peaks are measured or quoted (a calibration, a
    data sheet), so a run's share of them means something; ``False`` for
    the uncalibrated ``local`` guesses. ``source`` says where the figures
    came from.
    """

    name: str = attrs.field(default="custom", validator=_string)
    device_kind: str = attrs.field(
        default="gpu", converter=_device_kind, validator=_check_device_kind
    )
    nodes: int = attrs.field(default=1, validator=_positive_int)
    devices_per_node: int = attrs.field(default=8, validator=_positive_int)
    device_memory: float = attrs.field(default=80e9, converter=_number, validator=_positive)
    peak_flops: float = attrs.field(default=312e12, converter=_number, validator=_positive)
    memory_bandwidth: float = attrs.field(default=2.0e12, converter=_number, validator=_positive)
    shared_memory_bandwidth: float = attrs.field(
        default=0.0, converter=_number, validator=_non_negative
    )
    fresh_memory_bandwidth: float = attrs.field(
        default=0.0, converter=_number, validator=_non_negative
    )
    decode_overlap: bool = attrs.field(default=True, validator=_bool)
    intra_node_bandwidth: float = attrs.field(default=300e9, converter=_number, validator=_positive)
    inter_node_bandwidth: float = attrs.field(default=25e9, converter=_number, validator=_positive)
    intra_node_latency: float = attrs.field(default=10e-6, converter=_number, validator=_positive)
    inter_node_latency: float = attrs.field(default=30e-6, converter=_number, validator=_positive)
    usable_memory_fraction: float = attrs.field(default=0.9, converter=_number, validator=_fraction)
    flops_by_dtype: tuple[tuple[str, float], ...] = attrs.field(
        default=(),
        converter=_dtype_pairs,
        validator=_positive_pairs,
    )
    layer_overhead: float = attrs.field(default=0.0, converter=_number, validator=_non_negative)
    token_overhead: float = attrs.field(default=0.0, converter=_number, validator=_non_negative)
    update_overhead: float = attrs.field(default=0.0, converter=_number, validator=_non_negative)
    microbatch_overhead: float = attrs.field(
        default=0.0, converter=_number, validator=_non_negative
    )
    forward_overhead: float = attrs.field(default=0.0, converter=_number, validator=_non_negative)
    remote_update_overhead: float = attrs.field(
        default=0.0, converter=_number, validator=_non_negative
    )
    remote_microbatch_overhead: float = attrs.field(
        default=0.0, converter=_number, validator=_non_negative
    )
    remote_forward_overhead: float = attrs.field(
        default=0.0, converter=_number, validator=_non_negative
    )
    reshard_overhead: float = attrs.field(default=0.0, converter=_number, validator=_non_negative)
    call_overhead: float = attrs.field(default=0.0, converter=_number, validator=_non_negative)
    remote_call_overhead: float = attrs.field(
        default=0.0, converter=_number, validator=_non_negative
    )
    efficiency: tuple[tuple[str, float], ...] = attrs.field(
        default=(),
        converter=_pairs_of("efficiency", "{training_efficiency: 0.5}"),
        validator=_positive_pairs,
    )
    by_threads: tuple[tuple[int, tuple[tuple[str, float], ...]], ...] = attrs.field(
        default=(), converter=_by_threads, validator=_check_by_threads
    )
    peaks_measured: bool = attrs.field(default=True, validator=_bool)
    source: str = ""

    def __attrs_post_init__(self) -> None:
        if self.num_devices > MAX_DEVICES:
            raise HfsdkError(
                f"cluster {self.name!r} has {self.num_devices} devices ({self.nodes} nodes of "
                f"{self.devices_per_node}); the planner searches at most {MAX_DEVICES}"
            )

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
        whole nodes, because pools are spread over identical nodes. A CPU profile's
        devices are slots of one machine: more of them than it has cores share its
        memory (each gets ``cores / num_devices`` of a core's share), they add none.
        """
        if isinstance(num_devices, bool) or not isinstance(num_devices, int) or num_devices < 1:
            raise HfsdkError(f"device count must be an integer >= 1, got {num_devices!r}")
        if self.device_kind == "cpu" and num_devices > self.num_devices:
            host = self.device_memory * self.num_devices
            return attrs.evolve(
                self, nodes=1, devices_per_node=num_devices, device_memory=host / num_devices
            )
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

    def pool_nodes(self, devices: int) -> int:
        """The nodes a pool of ``devices`` spreads over: the fewest that hold it evenly.

        A run puts ``devices // nodes`` on each node, so the count divides ``devices``;
        a CPU profile's devices are slots of the one machine a run uses (always 1).
        """
        if self.device_kind == "cpu":
            return 1
        nodes = -(-devices // self.devices_per_node)  # ceil: no node holds more than it has
        while devices % nodes:
            nodes += 1
        return nodes

    def for_dtype(self, dtype: str | None) -> Cluster:
        """The same hardware computing in ``dtype``: its ``flops_by_dtype`` figure as the peak.

        Unknown or unmeasured dtypes keep ``peak_flops``.
        """
        table = dict(self.flops_by_dtype)
        key = _dtype_name(str(dtype))
        if key not in table:
            return self
        return attrs.evolve(self, peak_flops=table[key])

    def thread_counts(self) -> tuple[int, ...]:
        """The thread counts per device this profile has figures for (1: the top level)."""
        return tuple(sorted({1, *(threads for threads, _f in self.by_threads)}))

    def for_threads(self, threads: int) -> Cluster:
        """The same hardware with each device computing on ``threads`` CPU threads.

        The top-level figures are one thread's; ``by_threads`` holds what the
        calibration measured at more (two threads are not twice one). Between
        two measured counts every figure is interpolated linearly, beyond the
        largest it stays at the largest's. A profile without ``by_threads``
        (a GPU preset, an older calibration) is returned as it is.
        """
        if not self.by_threads or threads <= 1:
            return self
        points = [(1, {}), *((t, dict(f)) for t, f in self.by_threads)]
        below = max((p for p in points if p[0] <= threads), key=lambda p: p[0])
        above = min((p for p in points if p[0] >= threads), key=lambda p: p[0], default=below)

        def figures(point: tuple[int, dict[str, float]]) -> dict[str, float]:
            out = {name: float(getattr(self, name)) for name in THREAD_FIELDS}
            out |= {f"flops.{k}": v for k, v in self.flops_by_dtype}
            out |= {f"efficiency.{k}": v for k, v in self.efficiency}
            return out | point[1]

        low, high = figures(below), figures(above)
        span = above[0] - below[0]
        weight = (threads - below[0]) / span if span else 0.0
        mixed = {k: low[k] + weight * (high.get(k, low[k]) - low[k]) for k in low}
        return attrs.evolve(
            self,
            **{name: mixed[name] for name in THREAD_FIELDS},
            flops_by_dtype={k[6:]: v for k, v in mixed.items() if k.startswith("flops.")},
            efficiency={k[11:]: v for k, v in mixed.items() if k.startswith("efficiency.")},
            by_threads=(),
        )

    def bandwidth_per_device(self, busy: int = 1) -> float:
        """Memory bandwidth one device gets while ``busy`` devices of its node stream at once."""
        if not self.shared_memory_bandwidth:
            return self.memory_bandwidth
        sharing = max(1, min(busy, self.devices_per_node))
        return min(self.memory_bandwidth, self.shared_memory_bandwidth / sharing)

    def for_executor(self, in_process: bool, sharded: bool | None = None) -> Cluster:
        """This cluster with the backend and call overheads of one executor kind.

        The simulator reads ``update_overhead``, ``microbatch_overhead``,
        ``forward_overhead`` and ``call_overhead``. For worker processes
        (``in_process`` false) the call overhead becomes ``remote_call_overhead``;
        for roles sharded over several processes (``sharded``, by default
        ``not in_process``) the backend's three become their ``remote_`` figures.
        A one-device role in a worker process (beside a rollout pool, or under
        ``trainer.executor: ray``) pays a process's calls but no sharding: the
        remote backend figures, fitted on two ranks, would price the
        collectives' fixed costs it does not have.
        """
        sharded = not in_process if sharded is None else sharded
        out = self
        if sharded:
            out = attrs.evolve(
                out,
                update_overhead=self.remote_update_overhead,
                microbatch_overhead=self.remote_microbatch_overhead,
                forward_overhead=self.remote_forward_overhead,
            )
        if not in_process:
            out = attrs.evolve(out, call_overhead=self.remote_call_overhead)
        return out

    # -- profiles (YAML) -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data: every field, mappings for the per-name tables."""
        data = attrs.asdict(self, recurse=False)
        data["flops_by_dtype"] = dict(self.flops_by_dtype)
        data["efficiency"] = dict(self.efficiency)
        by_threads: dict[int, dict[str, Any]] = {}
        for threads, figures in self.by_threads:
            entry: dict[str, Any] = {}
            for key, number in figures:
                head, _dot, name = key.partition(".")
                if head == "flops":
                    entry.setdefault("flops_by_dtype", {})[name] = number
                elif head == "efficiency":
                    entry.setdefault("efficiency", {})[name] = number
                else:
                    entry[key] = number
            by_threads[threads] = entry
        data["by_threads"] = by_threads
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "cluster profile") -> Cluster:
        """A cluster from :meth:`to_dict`'s data; unknown keys are an error naming them."""
        if not isinstance(data, Mapping):
            raise HfsdkError(f"{where} must be a mapping of cluster fields, got {data!r}")
        fields = {f.name for f in attrs.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise HfsdkError(
                f"{where} has unknown keys {unknown}; allowed: {', '.join(sorted(fields))}"
            )
        try:
            return cls(**dict(data))
        except HfsdkError as exc:
            # The field's own check names the field; only here is the file known.
            raise HfsdkError(f"{where}: {exc}") from None

    def save(self, path: str | Path) -> None:
        """Write the profile to ``path`` as YAML (atomically: temp file, then rename)."""
        import yaml

        from hfsdk import write_text_atomic

        write_text_atomic(path, yaml.safe_dump(self.to_dict(), sort_keys=False))

    @classmethod
    def load(cls, path: str | Path) -> Cluster:
        """Read a profile written by :meth:`save` (or by hand)."""
        import yaml

        from hfsdk import load_yaml_text

        path = Path(path)
        try:
            data = load_yaml_text(path.read_text(), source=f"cluster profile {str(path)!r}")
        except (OSError, ValueError, yaml.YAMLError) as exc:  # ValueError: not UTF-8
            raise HfsdkError(f"cannot read cluster profile {str(path)!r}: {exc}") from None
        # The other fields have defaults; without these the plan would be a data sheet's GPU.
        missing = [k for k in PROFILE_FIGURES if not isinstance(data, dict) or k not in data]
        if missing:
            raise HfsdkError(
                f"cluster profile {str(path)!r} has no {', '.join(missing)}; a profile gives "
                "the device's figures (hfsdk calibrate --output FILE measures them)"
            )
        return cls.from_dict(data, where=f"cluster profile {str(path)!r}")


PROFILE_FIGURES = ("device_memory", "peak_flops", "memory_bandwidth")
"""The fields a cluster profile file must give: what the planner prices every stage with."""

DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
"""Short dtype names accepted by :meth:`Cluster.for_dtype` and as ``flops_by_dtype`` keys."""


# The data sheets give no per-layer launch overhead; with large batches and CUDA graphs in
# decode it is small next to the FLOPs and bytes. A calibrated profile measures it.
_GPU_LAYER_OVERHEAD = 0.0


def a100_80gb() -> Cluster:
    """DGX-A100-like nodes: 8 x A100-80GB SXM, NVLink 600 GB/s, 8 x 200 Gb/s InfiniBand.

    Figures from NVIDIA's A100 data sheet (SXM4 80GB) and the DGX A100 data
    sheet. One node by default; ``with_devices`` scales it to the requested size.
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
        flops_by_dtype={"bfloat16": 312e12, "float16": 312e12, "float32": 19.5e12},
        layer_overhead=_GPU_LAYER_OVERHEAD,
        source="NVIDIA A100 data sheet (SXM4 80GB), DGX A100 data sheet",
    )


def h100_80gb() -> Cluster:
    """DGX-H100-like nodes: 8 x H100-80GB SXM5, NVLink 900 GB/s, 8 x 400 Gb/s NDR InfiniBand.

    Figures from NVIDIA's H100 Tensor Core GPU data sheet (H100 SXM: 989.4
    TFLOP/s dense bf16, 67 TFLOP/s fp32, 3.35 TB/s HBM3, NVLink 900 GB/s) and
    the DGX H100 data sheet (eight ConnectX-7 400 Gb/s ports per node).
    """
    return Cluster(
        name="h100-80gb",
        device_kind="gpu",
        nodes=1,
        devices_per_node=8,
        device_memory=80e9,
        peak_flops=989.4e12,  # dense bf16 (1979 TFLOP/s is with sparsity)
        memory_bandwidth=3.35e12,
        intra_node_bandwidth=450e9,  # 900 GB/s NVLink 4, bidirectional
        inter_node_bandwidth=50e9,  # one 400 Gb/s NDR NIC per GPU
        intra_node_latency=8e-6,
        inter_node_latency=25e-6,
        usable_memory_fraction=0.9,
        flops_by_dtype={"bfloat16": 989.4e12, "float16": 989.4e12, "float32": 66.9e12},
        layer_overhead=_GPU_LAYER_OVERHEAD,
        source="NVIDIA H100 Tensor Core GPU data sheet (SXM5), DGX H100 data sheet",
    )


def h200_141gb() -> Cluster:
    """DGX-H200-like nodes: 8 x H200-141GB SXM, NVLink 900 GB/s, 8 x 400 Gb/s InfiniBand.

    Figures from NVIDIA's H200 Tensor Core GPU data sheet (H200 SXM: 141 GB
    HBM3e at 4.8 TB/s, 989 TFLOP/s dense bf16, 67 TFLOP/s fp32, NVLink 900
    GB/s) and the DGX H200 data sheet (eight 400 Gb/s ConnectX-7 ports).
    """
    return Cluster(
        name="h200-141gb",
        device_kind="gpu",
        nodes=1,
        devices_per_node=8,
        device_memory=141e9,
        peak_flops=989.4e12,  # dense bf16, the same Hopper tensor cores as the H100
        memory_bandwidth=4.8e12,
        intra_node_bandwidth=450e9,  # 900 GB/s NVLink 4, bidirectional
        inter_node_bandwidth=50e9,  # one 400 Gb/s NIC per GPU
        intra_node_latency=8e-6,
        inter_node_latency=25e-6,
        usable_memory_fraction=0.9,
        flops_by_dtype={"bfloat16": 989.4e12, "float16": 989.4e12, "float32": 66.9e12},
        layer_overhead=_GPU_LAYER_OVERHEAD,
        source="NVIDIA H200 Tensor Core GPU data sheet (SXM), DGX H200 data sheet",
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
        layer_overhead=150e-6,
        peaks_measured=False,
        source="uncalibrated guesses for a CPU core; run `hfsdk calibrate` to measure this machine",
    )


PRESETS: dict[str, Callable[[], Cluster]] = {
    "a100-80gb": a100_80gb,
    "h100-80gb": h100_80gb,
    "h200-141gb": h200_141gb,
    "local": local,
}
"""The core's cluster presets by name (the builtin plugin registers them); each call builds
a fresh description. Look presets up with :func:`cluster_presets`, which includes plugins'."""
