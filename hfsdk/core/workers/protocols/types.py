"""The protocol types: what a dispatch sees (:class:`DispatchContext`), what it returns
(:class:`DispatchPlan`) and a protocol itself (:class:`TransferProtocol`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.futures import CollectSpec
from hfsdk.core.workers.mesh import MeshPosition

Layout = Literal["concat", "list", "other"]
"""How a protocol's collected value relates to the ranks' results.

``concat``: the rows of the collected results, concatenated, minus the padding
(a future of it can be split by rows again); ``list``: the collected results
as a list, one per rank (a future of it can be handed out per rank);
``other``: anything else (a future of it can only be passed whole).
"""


@attrs.frozen(kw_only=True)
class DispatchContext:
    """What a dispatch function knows about the call."""

    role: str
    method: str
    protocol: str
    world_size: int
    options: Mapping[str, Any] = attrs.field(factory=dict)
    mesh_lookup: Callable[[str], tuple[MeshPosition, ...]] | None = None

    def error(self, message: str) -> HfsdkError:
        """An error prefixed with ``role.method (protocol)``."""
        return HfsdkError(f"{self.role}.{self.method} ({self.protocol}): {message}")

    def mesh(self) -> tuple[MeshPosition, ...]:
        """Every rank's position in the mesh named by the ``mesh=`` option of ``@register``."""
        name = self.options.get("mesh")
        if not isinstance(name, str) or not name:
            raise self.error(
                "needs the name of a mesh; register the method with "
                f"@register(protocol=BuiltinProtocol.{self.protocol.upper()}, mesh='<name>')"
            )
        if self.mesh_lookup is None:
            raise self.error("mesh positions are only known inside a WorkerGroup")
        return self.mesh_lookup(name)


@attrs.frozen(kw_only=True)
class DispatchPlan:
    """Which ranks run with which ``(args, kwargs)``, and what collect gets.

    ``collect_ranks`` lists the ranks whose results collect receives, in that
    order (default: every rank that runs, by rank); the other ranks still run
    but send no result back. ``pad`` is the number of padding rows appended to
    the split data (collect removes them); ``state`` is free for the protocol.
    """

    calls: Mapping[int, tuple[tuple[Any, ...], dict[str, Any]]]
    collect_ranks: tuple[int, ...] | None = None
    pad: int = 0
    state: Any = None

    def collect_spec(self) -> CollectSpec:
        """The part of the plan collect needs (no arguments, so it is cheap to keep)."""
        ranks = self.collect_ranks if self.collect_ranks is not None else tuple(sorted(self.calls))
        return CollectSpec(ranks=tuple(ranks), pad=self.pad, state=self.state)


Dispatch = Callable[[DispatchContext, tuple[Any, ...], dict[str, Any]], DispatchPlan]
Collect = Callable[[list[Any], CollectSpec], Any]


@attrs.frozen(kw_only=True)
class TransferProtocol:
    """A named ``(dispatch, collect)`` pair.

    ``collect`` must be a module-level function (workers run it when they
    resolve a future of this protocol passed whole to another group).
    """

    name: str
    dispatch: Dispatch
    collect: Collect
    layout: Layout = attrs.field(
        default="other", validator=attrs.validators.in_(("concat", "list", "other"))
    )
    doc: str = ""

    def __attrs_post_init__(self) -> None:
        if not callable(self.dispatch) or not callable(self.collect):
            raise HfsdkError(
                f"transfer protocol {self.name!r}: dispatch and collect must be callables"
            )
