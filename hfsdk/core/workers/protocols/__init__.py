"""Transfer protocols: how a controller call is split across ranks and how results come back.

A :class:`TransferProtocol` is a ``(dispatch, collect)`` pair. ``dispatch``
runs on the controller and returns a :class:`DispatchPlan` (which ranks run
with which arguments, whose results are collected, how many padding rows were
added); ``collect`` turns the collected ranks' results into the call's value.
Every protocol is a registry entry (``hfsdk.get_registry("transfer_protocols")``),
filled by the core's built-in plugin and by plugins through
``hfsdk_register_transfer_protocols``. ``docs/runtime.md`` has the table.

Arguments may be :class:`~hfsdk.core.workers.futures.CallFuture` objects from
other calls; the built-in dispatches turn them into per-rank
:class:`~hfsdk.core.workers.futures.DataRef` objects that workers resolve from
the object store themselves.

No torch or ray at import time.

The package is split by job: :mod:`.types` (the protocol types),
:mod:`.rows` (splitting arguments by rows, padding), :mod:`.builtins` (the
built-in dispatch/collect functions and their table) and :mod:`.lookup`
(finding a protocol in the registry; the only module that reads it).
"""

from hfsdk.core.workers.protocols.builtins import (
    BUILTIN_PROTOCOLS,
    collect_concat_batches,
    collect_mean_metrics,
    dispatch_dp_compute_proto,
    dispatch_dp_compute_train,
)
from hfsdk.core.workers.protocols.lookup import (
    as_transfer_protocol,
    lookup_protocol,
    resolve_protocol,
)
from hfsdk.core.workers.protocols.rows import (
    PAD_ROWS_META,
    check_mesh,
    padding_rows,
    row_segments,
    split_rows,
)
from hfsdk.core.workers.protocols.types import DispatchContext, DispatchPlan, TransferProtocol

__all__ = [
    "BUILTIN_PROTOCOLS",
    "PAD_ROWS_META",
    "DispatchContext",
    "DispatchPlan",
    "TransferProtocol",
    "as_transfer_protocol",
    "check_mesh",
    "collect_concat_batches",
    "collect_mean_metrics",
    "dispatch_dp_compute_proto",
    "dispatch_dp_compute_train",
    "lookup_protocol",
    "padding_rows",
    "resolve_protocol",
    "row_segments",
    "split_rows",
]
