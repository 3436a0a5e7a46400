"""``@register``: turn a worker method into a method of its :class:`WorkerGroup`.

A decorated method keeps working as a plain method inside the worker; the
decorator only attaches a :class:`MethodSpec` that the worker group reads when
it binds the controller-side method. Light module: no torch, no ray.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from hfsdk.core.errors import HfsdkError

F = TypeVar("F", bound=Callable[..., Any])

SPEC_ATTR = "__hfsdk_method_spec__"
"""Attribute under which the decorator stores the :class:`MethodSpec` on the function."""


class BuiltinProtocol(enum.StrEnum):
    """Names of the built-in transfer protocols (values are their registry names).

    See ``docs/runtime.md`` for what each one dispatches and collects.
    """

    ONE_TO_ALL = "one_to_all"
    ALL_TO_ALL = "all_to_all"
    RANK_ZERO = "rank_zero"
    DP_COMPUTE = "dp_compute"
    DP_COMPUTE_PROTO = "dp_compute_proto"
    DP_COMPUTE_PROTO_WITH_FUNC = "dp_compute_proto_with_func"
    DP_COMPUTE_METRIC = "dp_compute_metric"
    MESH_PROTO = "mesh_proto"


Protocol = BuiltinProtocol
"""Deprecated alias of :class:`BuiltinProtocol` (the old name read like ``typing.Protocol``)."""


@attrs.frozen(kw_only=True)
class MethodSpec:
    """How the controller calls a worker method.

    ``protocol`` is a :class:`BuiltinProtocol` member, a registered protocol name or a
    :class:`~hfsdk.core.workers.protocols.TransferProtocol`; ``blocking`` says
    whether the group method waits for the result (``False`` returns a
    :class:`~hfsdk.core.workers.futures.CallFuture`); ``options`` reach the
    protocol's dispatch (e.g. ``mesh="train"`` for ``MESH_PROTO``).
    """

    protocol: Any
    blocking: bool = True
    options: dict[str, Any] = attrs.field(factory=dict)


def register(
    protocol: BuiltinProtocol | str | Any = BuiltinProtocol.ONE_TO_ALL,
    *,
    blocking: bool = True,
    **options: Any,
) -> Callable[[F], F]:
    """Mark a worker method as callable from the controller through ``protocol``.

    ``@register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)`` on ``compute_log_prob``
    gives the worker group a ``compute_log_prob(batch)`` that splits ``batch``
    across data-parallel ranks and concatenates the results. ``protocol`` may be
    a :class:`BuiltinProtocol` member, the name of a protocol registered through
    ``hfsdk_register_transfer_protocols`` (looked up when the group is built),
    or a ``TransferProtocol`` object. ``blocking=False`` makes the group method
    return a future. Extra keyword ``options`` are passed to the protocol's
    dispatch (``MESH_PROTO`` needs ``mesh="<name>"``).
    """
    if isinstance(protocol, str):
        if not protocol:
            raise HfsdkError("register(protocol=''): expected a BuiltinProtocol member or a name")
    elif not (hasattr(protocol, "dispatch") and hasattr(protocol, "collect")):
        raise HfsdkError(
            f"register(protocol={protocol!r}): expected a BuiltinProtocol member (e.g. "
            "BuiltinProtocol.DP_COMPUTE_PROTO), a registered protocol name, or a TransferProtocol"
        )
    if not isinstance(blocking, bool):
        raise HfsdkError(f"register(blocking={blocking!r}): expected True or False")
    spec = MethodSpec(protocol=protocol, blocking=blocking, options=dict(options))

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise HfsdkError(f"@register must decorate a method, got {fn!r}")
        setattr(fn, SPEC_ATTR, spec)
        return fn

    return decorate


def registered_methods(cls: type) -> dict[str, MethodSpec]:
    """The ``@register``-ed methods of ``cls`` (inherited ones included), by name."""
    found: dict[str, MethodSpec] = {}
    for name in dir(cls):
        try:
            member = getattr(cls, name)
        except AttributeError:  # descriptors that only work on instances
            continue
        spec = getattr(member, SPEC_ATTR, None)
        if isinstance(spec, MethodSpec):
            found[name] = spec
    return found
