"""The worker ``hfsdk calibrate`` times calls with: an identity method (imports torch)."""

from __future__ import annotations

from hfsdk import Batch, BuiltinProtocol, Worker, register


class EchoWorker(Worker):
    """Returns its shard of the batch: a call's cost is all dispatch, copies and collect."""

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def echo(self, batch: Batch) -> Batch:
        """The batch as received."""
        return batch
