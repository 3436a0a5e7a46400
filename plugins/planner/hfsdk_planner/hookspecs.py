"""Hook specifications the planner adds (through ``hfsdk_addhooks``)."""

from __future__ import annotations

import pluggy

from hfsdk import Register

hookspec = pluggy.HookspecMarker("hfsdk")


@hookspec
def hfsdk_register_clusters(register: Register) -> None:
    """Register cluster presets for the placement planner: ``register(name, factory)``.

    ``factory()`` returns a cluster description (the placement plugin's
    ``Cluster``: devices per node, memory, peak FLOP/s, bandwidths, latencies);
    ``hfsdk plan --cluster NAME`` and ``placement.cluster: NAME`` select it.
    Name figures' sources (a data sheet, a calibration) in ``Cluster.source``.
    """
