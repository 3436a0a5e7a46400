"""Parallel layouts a role may use on a number of devices.

Training and inference use (p, t, d): pipeline, tensor and data parallel
sizes with p * t * d devices. Generation uses (tg, dg) with no pipeline: the
actor's 3D-HybridEngine regroups its training ranks so tg divides t and
each rank keeps its training shard (``hfsdk_backend_common.hybrid.layout``).
"""

from __future__ import annotations

import attrs

from hfsdk_planner.cluster import Cluster
from hfsdk_planner.model_spec import ModelSpec


@attrs.frozen(order=True)
class Layout:
    """Pipeline (``p``), tensor (``t``) and data (``d``) parallel sizes."""

    p: int
    t: int
    d: int

    @property
    def devices(self) -> int:
        """Devices the layout spans."""
        return self.p * self.t * self.d

    @property
    def model_parallel(self) -> int:
        """Devices one model replica is split over."""
        return self.p * self.t

    def __str__(self) -> str:
        return f"p{self.p} t{self.t} d{self.d}"


@attrs.frozen(order=True)
class GenerationLayout:
    """Rollout layout: tensor parallel ``tg``, ``dg`` replicas, no pipeline.

    ``running`` is how many sequences a replica decodes at once (its KV cache
    holds that many); a replica's share of the batch goes through in waves of
    that size, as a continuous-batching engine would when memory is short.
    """

    tg: int
    dg: int
    running: int

    def __str__(self) -> str:
        return f"tg{self.tg} dg{self.dg} r{self.running}"


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in ascending order."""
    small = [k for k in range(1, int(n**0.5) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def tensor_parallel_ok(model: ModelSpec, t: int, cluster: Cluster) -> bool:
    """Whether ``t`` splits the model's heads evenly and stays inside one node."""
    if t > cluster.devices_per_node or model.num_heads % t:
        return False
    # Grouped KV heads are split, or replicated when t exceeds their number.
    return model.num_kv_heads % t == 0 or t % model.num_kv_heads == 0


def training_layouts(
    model: ModelSpec, devices: int, cluster: Cluster, max_data_parallel: int
) -> list[Layout]:
    """Every (p, t, d) on ``devices`` devices that the model's shape admits.

    Pipeline stages hold equal numbers of layers (p divides the layer count);
    data parallelism beyond ``max_data_parallel`` would leave replicas idle.
    """
    layouts = []
    for t in divisors(devices):
        if not tensor_parallel_ok(model, t, cluster):
            continue
        for p in divisors(devices // t):
            d = devices // (t * p)
            if model.num_layers % p == 0 and d <= max_data_parallel:
                layouts.append(Layout(p, t, d))
    return layouts


MIN_RUNNING = 8
"""The smallest running batch (sequences per rollout replica) worth trying."""


def running_batch_sizes(replica_sequences: int, max_running: int) -> list[int]:
    """Concurrent-sequence counts worth trying: powers of two from 8, and the cap itself."""
    cap = max(1, min(replica_sequences, max_running))
    sizes = {cap}
    size = MIN_RUNNING
    while size < cap:
        sizes.add(size)
        size *= 2
    return sorted(sizes)


def generation_layouts(
    model: ModelSpec, layout: Layout, cluster: Cluster, sequences: int, max_running: int
) -> list[GenerationLayout]:
    """Rollout layouts the HybridEngine can regroup ``layout`` into (tg divides t).

    The engine keeps each rank's training shard inside its generation shard,
    so the generation tensor-parallel size divides the training one (and the
    rollout has no pipeline: every micro-DP group spans all p stages).

    Each tensor-parallel size comes with every running-batch size worth trying
    for its replicas' share of ``sequences``.
    """
    found = []
    for tg in divisors(layout.t):
        if not tensor_parallel_ok(model, tg, cluster):
            continue
        dg = layout.devices // tg
        for running in running_batch_sizes(-(-sequences // dg), max_running):
            found.append(GenerationLayout(tg, dg, running))
    return found
