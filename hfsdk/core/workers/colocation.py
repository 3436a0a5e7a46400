"""Colocation: several roles on one pool's devices.

Two modes (``colocate(pool, roles, fused=...)``):

* **fused** (default): one process per device holds one object per role (a
  multi-role worker). The roles share the process, its ``torch.distributed``
  group and its device, and their calls run one after another — they
  time-share the device and can hand tensors to each other in memory.
* **separate**: one process per role per device, each with
  ``1/max_colocate`` of the device (build the pool with
  ``max_colocate >= len(roles)``). Each role has its own
  ``torch.distributed`` group; calls on a shared device still run one after
  another, in the order the controller issued them.

Roles on different pools run concurrently. On a
:class:`~hfsdk.core.workers.local_hosts.LocalPool` the fused roles live in
the controller's own process (no Ray).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.host import RoleSpec
from hfsdk.core.workers.local_hosts import LocalHostSet, LocalPool
from hfsdk.core.workers.resource_pool import ResourcePool
from hfsdk.core.workers.worker import Worker
from hfsdk.core.workers.worker_group import GroupOptions, HostSet, WorkerGroup, check_worker_class

RoleArg = type[Worker] | RoleSpec | tuple[Any, ...]


def role_spec(role: str, value: RoleArg) -> RoleSpec:
    """``Cls``, ``(Cls, kwargs)``, ``(Cls, args, kwargs)`` or a :class:`RoleSpec`, as a spec."""
    if isinstance(value, RoleSpec):
        spec = value
    elif isinstance(value, type):
        spec = RoleSpec(worker_cls=value)
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], Mapping):
        spec = RoleSpec(worker_cls=value[0], kwargs=dict(value[1]))
    elif isinstance(value, tuple) and len(value) == 3:
        spec = RoleSpec(worker_cls=value[0], args=tuple(value[1]), kwargs=dict(value[2]))
    else:
        raise HfsdkError(
            f"role {role!r}: expected a Worker class, (class, kwargs), (class, args, kwargs) "
            f"or a RoleSpec, got {value!r}"
        )
    check_worker_class(spec.worker_cls, role)
    return spec


def colocate(
    pool: ResourcePool | LocalPool,
    roles: Mapping[str, RoleArg],
    *,
    fused: bool = True,
    init_distributed: bool = True,
    start_timeout_s: float = 120.0,
    call_timeout_s: float | None = None,
    collective_timeout_s: float = 1800.0,
    env_vars: Mapping[str, str] | None = None,
) -> dict[str, WorkerGroup]:
    """Put every role of ``roles`` on all devices of ``pool``; return one group per role.

    ``fused=True`` builds one multi-role process per device; ``fused=False``
    one process per role per device. Either way each returned group only has
    its own role's methods, and its state is its own. The other arguments are
    those of :class:`WorkerGroup`.
    """
    if not roles:
        raise HfsdkError("colocate() needs at least one role")
    specs = {role: role_spec(role, value) for role, value in roles.items()}
    in_process = isinstance(pool, LocalPool)
    if in_process and not fused and len(specs) > 1:
        raise HfsdkError(
            "in-process workers hold every role in one process: colocate them fused "
            "(placement.colocation: fused) or use Ray workers (trainer.executor: ray)"
        )
    if not fused and not in_process:
        groups: dict[str, WorkerGroup] = {}
        try:
            for role, spec in specs.items():
                groups[role] = WorkerGroup(
                    spec.worker_cls,
                    pool,
                    role=role,
                    args=spec.args,
                    kwargs=spec.kwargs,
                    init_distributed=init_distributed,
                    start_timeout_s=start_timeout_s,
                    call_timeout_s=call_timeout_s,
                    collective_timeout_s=collective_timeout_s,
                    env_vars=env_vars,
                )
        except BaseException:
            for group in groups.values():
                group.shutdown()
            raise
        return groups
    # Resolve every role's protocols before starting processes.
    from hfsdk.core.workers.worker_group import _resolve_methods

    for role, spec in specs.items():
        _resolve_methods(spec.worker_cls, role)
    options = GroupOptions(
        init_distributed=init_distributed,
        start_timeout_s=start_timeout_s,
        call_timeout_s=call_timeout_s,
        collective_timeout_s=collective_timeout_s,
        env_vars=env_vars or {},
    )
    host_set = LocalHostSet if in_process else HostSet
    hosts = host_set(pool, specs, name="+".join(specs), options=options)
    return {
        role: WorkerGroup._on_hosts(hosts, role, spec.worker_cls, call_timeout_s)
        for role, spec in specs.items()
    }
