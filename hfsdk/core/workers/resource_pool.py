"""Resource pools: named sets of devices as Ray placement groups, one per node.

A pool of ``devices_per_node x nodes`` devices is ``nodes`` placement groups
of ``devices_per_node`` bundles, each packed onto one node (``STRICT_PACK``).
Devices are GPUs, or on a machine without GPUs virtual device slots (the
custom resource ``hfsdk_device`` that :func:`~hfsdk.core.workers.ray_runtime.connect`
creates), so everything runs on CPU. Ranks follow a stable order: the
driver's node first, then by node address, then bundle index.

Roles bound to one pool share its devices; each device slot remembers the
processes placed on it and the last call that ran there, which is how calls of
colocated roles are run one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import attrs

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.errors import InfeasibleResourcesError, ResourceTimeoutError


@attrs.define(eq=False)
class DeviceSlot:
    """One device of a pool: bundle ``bundle_index`` of placement group ``pg`` on a node.

    ``hosts`` are the worker processes placed on it (by id); ``last`` is
    ``(host id, completion token)`` of the latest call that ran on it.
    """

    pg: Any
    bundle_index: int
    node_id: str
    node_ip: str
    local_index: int
    hosts: list[int] = attrs.field(factory=list)
    last: tuple[int, Any] | None = None


class ResourcePool:
    """``devices_per_node`` devices on each of ``nodes`` nodes, held as placement groups.

    ``max_colocate`` is how many separate worker processes may share one device
    (each gets ``1/max_colocate`` of it); fused multi-role workers count as one
    process. ``cpus_per_device`` is the CPU share reserved per device (small by
    default: workers mostly wait or use accelerators). Creating a pool the
    cluster can never hold raises :class:`InfeasibleResourcesError` at once with
    both numbers; a pool that fits but finds the devices taken waits up to
    ``timeout_s`` and raises :class:`ResourceTimeoutError`.

    Starts a local Ray instance through :func:`connect` if none is running.
    """

    def __init__(
        self,
        devices_per_node: int = 1,
        nodes: int = 1,
        *,
        name: str = "pool",
        max_colocate: int = 1,
        cpus_per_device: float = 0.01,
        timeout_s: float = 30.0,
        device_resource: str | None = None,
    ) -> None:
        for label, value in (
            ("devices_per_node", devices_per_node),
            ("nodes", nodes),
            ("max_colocate", max_colocate),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise HfsdkError(f"ResourcePool({label}={value!r}): expected a positive integer")
        if cpus_per_device <= 0:
            raise HfsdkError(
                f"ResourcePool(cpus_per_device={cpus_per_device!r}): expected a positive number"
            )
        if timeout_s <= 0:
            raise HfsdkError(f"ResourcePool(timeout_s={timeout_s!r}): expected seconds > 0")
        from hfsdk.core.workers.ray_runtime import connect, device_resource_name

        connect()
        self.name = name
        self.max_colocate = max_colocate
        self.cpus_per_device = cpus_per_device
        self.device_resource = device_resource or device_resource_name()
        self._root: ResourcePool | None = None
        self._pgs: list[Any] = []
        self._released = False
        self._check_feasible(devices_per_node, nodes)
        self.slots = self._place(devices_per_node, nodes, timeout_s)

    # -------------------------------------------------------------- placement

    def _check_feasible(self, per_node: int, nodes: int) -> None:
        import ray

        capacity = [
            (n["NodeManagerAddress"], float(n["Resources"].get(self.device_resource, 0.0)))
            for n in ray.nodes()
            if n.get("Alive")
        ]
        fits = sum(int(have // per_node) for _, have in capacity)
        if fits >= nodes:
            return
        total = sum(have for _, have in capacity)
        per = ", ".join(f"node {ip}: {have:g}" for ip, have in capacity) or "no nodes"
        hint = ""
        if total == 0 and self.device_resource != "GPU":
            hint = (
                f"; start Ray nodes with resources={{'{self.device_resource}': N}} "
                "(hfsdk's connect() does this for a local instance)"
            )
        raise InfeasibleResourcesError(
            f"resource pool {self.name!r} asks for {per_node * nodes} devices ({per_node} per "
            f"node x {nodes} node{'s' if nodes > 1 else ''}) of {self.device_resource!r}, but "
            f"the cluster has {total:g} ({per}); ask for fewer devices or add nodes{hint}"
        )

    def _place(self, per_node: int, nodes: int, timeout_s: float) -> list[DeviceSlot]:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        bundle = {"CPU": self.cpus_per_device, self.device_resource: 1}
        pgs = [
            placement_group([dict(bundle) for _ in range(per_node)], strategy="STRICT_PACK")
            for _ in range(nodes)
        ]
        ready, _ = ray.wait([pg.ready() for pg in pgs], num_returns=len(pgs), timeout=timeout_s)
        if len(ready) < len(pgs):
            for pg in pgs:
                remove_placement_group(pg)
            available = ray.available_resources().get(self.device_resource, 0.0)
            total = ray.cluster_resources().get(self.device_resource, 0.0)
            raise ResourceTimeoutError(
                f"resource pool {self.name!r}: only {len(ready)} of {nodes} node groups of "
                f"{per_node} devices were placed within {timeout_s:g} s; {available:g} of "
                f"{total:g} {self.device_resource!r} are free (other pools hold the rest); "
                "release other pools or raise timeout_s"
            )
        self._pgs = pgs
        return _slots_in_rank_order(pgs)

    # -------------------------------------------------------------- shape

    @property
    def world_size(self) -> int:
        """Number of devices in the pool."""
        return len(self.slots)

    def __len__(self) -> int:
        return len(self.slots)

    def __repr__(self) -> str:
        layout: dict[str, int] = {}
        for slot in self.slots:
            layout[slot.node_ip] = layout.get(slot.node_ip, 0) + 1
        return f"ResourcePool({self.name!r}, {self.world_size} x {self.device_resource}, {layout})"

    # -------------------------------------------------------------- split and merge

    @classmethod
    def _view(cls, slots: list[DeviceSlot], like: ResourcePool, name: str) -> ResourcePool:
        view = cls.__new__(cls)
        view.name = name
        view.max_colocate = like.max_colocate
        view.cpus_per_device = like.cpus_per_device
        view.device_resource = like.device_resource
        view._root = like._root or like
        view._pgs = []
        view._released = False
        view.slots = slots
        return view

    def split(self, sizes: Sequence[int], names: Sequence[str] | None = None) -> list[ResourcePool]:
        """Consecutive sub-pools of ``sizes`` devices (they must add up to the pool's size).

        Sub-pools share the placement groups of this pool; roles on different
        sub-pools run concurrently.
        """
        sizes = list(sizes)
        if any(not isinstance(s, int) or s < 1 for s in sizes) or sum(sizes) != self.world_size:
            raise HfsdkError(
                f"cannot split pool {self.name!r} of {self.world_size} devices into {sizes}; "
                f"give positive sizes that add up to {self.world_size}"
            )
        names = (
            list(names) if names is not None else [f"{self.name}.{i}" for i in range(len(sizes))]
        )
        if len(names) != len(sizes):
            raise HfsdkError(f"split: {len(sizes)} sizes but {len(names)} names")
        out, start = [], 0
        for size, name in zip(sizes, names, strict=True):
            out.append(ResourcePool._view(self.slots[start : start + size], self, name))
            start += size
        return out

    @staticmethod
    def merge(pools: Sequence[ResourcePool], name: str | None = None) -> ResourcePool:
        """One pool holding the devices of ``pools`` in order (they must not overlap)."""
        pools = list(pools)
        if not pools:
            raise HfsdkError("ResourcePool.merge needs at least one pool")
        first = pools[0]
        for pool in pools[1:]:
            if (pool.device_resource, pool.max_colocate) != (
                first.device_resource,
                first.max_colocate,
            ):
                raise HfsdkError(
                    f"cannot merge pool {pool.name!r} ({pool.device_resource}, max_colocate="
                    f"{pool.max_colocate}) with {first.name!r} ({first.device_resource}, "
                    f"max_colocate={first.max_colocate}); pools must agree on both"
                )
        slots = [slot for pool in pools for slot in pool.slots]
        if len({id(s) for s in slots}) != len(slots):
            raise HfsdkError(f"cannot merge pools {[p.name for p in pools]}: they share devices")
        return ResourcePool._view(slots, first, name or "+".join(p.name for p in pools))

    # -------------------------------------------------------------- binding processes

    def device_share(self) -> Fraction:
        """The fraction of a device each separate worker process on this pool gets."""
        return Fraction(1, self.max_colocate)

    def reserve(self, host_ids: Sequence[int], role: str) -> None:
        """Record one process per device (``host_ids[i]`` on device ``i``); fail if full."""
        self._check_usable()
        for slot in self.slots:
            if len(slot.hosts) >= self.max_colocate:
                raise HfsdkError(
                    f"resource pool {self.name!r} already holds {len(slot.hosts)} worker "
                    f"process(es) per device (max_colocate={self.max_colocate}); to add role "
                    f"{role!r} as a separate process build the pool with max_colocate="
                    f"{len(slot.hosts) + 1}, or fuse the roles into one process (fuse_roles)"
                )
        for slot, host_id in zip(self.slots, host_ids, strict=True):
            slot.hosts.append(host_id)

    def unreserve(self, host_ids: Sequence[int]) -> None:
        """Forget processes recorded by :meth:`reserve`."""
        for slot, host_id in zip(self.slots, host_ids, strict=True):
            if host_id in slot.hosts:
                slot.hosts.remove(host_id)
            if slot.last is not None and slot.last[0] == host_id:
                slot.last = None

    def actor_options(self, index: int) -> dict[str, Any]:
        """Ray actor options placing one worker process on device ``index``."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._check_usable()
        slot = self.slots[index]
        share = float(self.device_share())
        options: dict[str, Any] = {
            "num_cpus": self.cpus_per_device * share,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=slot.pg, placement_group_bundle_index=slot.bundle_index
            ),
        }
        if self.device_resource == "GPU":
            options["num_gpus"] = share
        else:
            options["resources"] = {self.device_resource: share}
        return options

    # -------------------------------------------------------------- release

    def _check_usable(self) -> None:
        root = self._root or self
        if root._released:
            raise HfsdkError(f"resource pool {self.name!r} was released; create a new pool")

    def release(self) -> None:
        """Give the devices back to Ray (kills workers still placed on them).

        Only the pool that created the placement groups can release them; a
        split or merged view shares them and raises.
        """
        if self._root is not None:
            raise HfsdkError(
                f"pool {self.name!r} is a view made by split/merge; release the pool "
                f"{self._root.name!r} it came from"
            )
        if self._released:
            return
        import ray
        from ray.util.placement_group import remove_placement_group

        if ray.is_initialized():
            for pg in self._pgs:
                remove_placement_group(pg)
        self._released = True

    def __enter__(self) -> ResourcePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _slots_in_rank_order(pgs: list[Any]) -> list[DeviceSlot]:
    """Device slots ordered driver's node first, then by node address and id."""
    import ray
    from ray.util.placement_group import placement_group_table

    ips = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    try:
        driver_node = ray.get_runtime_context().get_node_id()
    except Exception:  # a driver outside the cluster (Ray client) has no node
        driver_node = None
    placed = []
    for order, pg in enumerate(pgs):
        bundles = placement_group_table(pg)["bundles_to_node_id"]
        node_id = bundles[0]
        placed.append(((node_id != driver_node, ips.get(node_id, ""), node_id, order), pg, bundles))
    placed.sort(key=lambda item: item[0])
    slots: list[DeviceSlot] = []
    per_node: dict[str, int] = {}
    for _key, pg, bundles in placed:
        for index in sorted(bundles):
            node_id = bundles[index]
            local = per_node.get(node_id, 0)
            per_node[node_id] = local + 1
            slots.append(
                DeviceSlot(
                    pg=pg,
                    bundle_index=index,
                    node_id=node_id,
                    node_ip=ips.get(node_id, ""),
                    local_index=local,
                )
            )
    return slots
