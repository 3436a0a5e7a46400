"""Finding a protocol by name in the registry (the only part that reads the registry)."""

from __future__ import annotations

from typing import Any

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.decorator import BuiltinProtocol
from hfsdk.core.workers.protocols.types import TransferProtocol

# ---------------------------------------------------------------------- lookup


def as_transfer_protocol(name: str, impl: Any) -> TransferProtocol:
    """A registry entry's implementation as a :class:`TransferProtocol`.

    Plugins may register a ``TransferProtocol`` or a plain ``(dispatch, collect)`` pair.
    """
    if isinstance(impl, TransferProtocol):
        return impl
    if isinstance(impl, (tuple, list)) and len(impl) == 2 and all(callable(f) for f in impl):
        return TransferProtocol(name=name, dispatch=impl[0], collect=impl[1])
    raise HfsdkError(
        f"transfer protocol {name!r} is registered as {impl!r}; expected a TransferProtocol "
        "or a (dispatch, collect) pair of functions"
    )


def lookup_protocol(name: str) -> TransferProtocol:
    """The protocol registered as ``name`` (upper-case enum names are accepted too)."""
    from hfsdk.core.plugin_manager import get_registry

    registry = get_registry("transfer_protocols")
    if name not in registry and name.lower() in registry:
        name = name.lower()
    return as_transfer_protocol(name, registry[name].impl)


def resolve_protocol(protocol: BuiltinProtocol | str | TransferProtocol) -> TransferProtocol:
    """What ``@register(protocol=...)`` names, as a :class:`TransferProtocol`."""
    if isinstance(protocol, TransferProtocol):
        return protocol
    if isinstance(protocol, BuiltinProtocol):
        return lookup_protocol(protocol.value)
    if isinstance(protocol, str):
        return lookup_protocol(protocol)
    if hasattr(protocol, "dispatch") and hasattr(protocol, "collect"):
        return as_transfer_protocol(getattr(protocol, "name", "custom"), protocol)
    raise HfsdkError(
        f"unknown protocol {protocol!r}; expected a BuiltinProtocol member, a registered name or a "
        "TransferProtocol"
    )
