"""The futures the SDK polls: work queued on one model thread, results kept until fetched.

Every model operation runs on one thread in arrival order (the SDK sends a
training client's requests in its own order, one at a time), so operations of
different clients interleave but never overlap. A POST returns a request id at
once; ``/retrieve_future`` long-polls it: it answers as soon as the result is
ready, or with ``try_again`` after :data:`POLL_SECONDS` (the SDK then asks again).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

SHUTTING_DOWN = (
    "server shutting down; the request was not run: send it again once the server is back "
    "(saved checkpoints stay on disk)"
)
"""What a request cancelled by :meth:`Futures.close`, or sent after it, is answered with."""


class ShuttingDown(RuntimeError):
    """:meth:`Futures.close` was called: no more work is taken (the message says so)."""

    def __init__(self) -> None:
        super().__init__(SHUTTING_DOWN)


POLL_SECONDS = 20.0
"""How long one ``/retrieve_future`` waits before answering ``try_again`` (the SDK waits 45 s)."""
KEPT = 4096
"""Finished results kept for fetching (the oldest finished are dropped beyond it; requests
still queued or running are always kept)."""


class Futures:
    """The model thread and the results of the requests it ran."""

    def __init__(self) -> None:
        self._thread = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="hfsdk-serve-model"
        )
        self._results: OrderedDict[str, concurrent.futures.Future[Any]] = OrderedDict()
        self._closed = False

    def _queue(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        # The executor's own error after shutdown is a bare RuntimeError; the routes answer
        # ShuttingDown with one line instead of a 500 and a traceback.
        if self._closed:
            raise ShuttingDown()
        try:
            return self._thread.submit(fn, *args)
        except RuntimeError:  # closed between the check and the submit
            raise ShuttingDown() from None

    def submit(self, fn: Callable[..., Any], *args: Any) -> str:
        """Queue ``fn(*args)`` on the model thread; its request id (:class:`ShuttingDown`
        after :meth:`close`)."""
        request_id = f"req_{secrets.token_hex(8)}"
        self._results[request_id] = self._queue(fn, *args)
        excess = len(self._results) - KEPT
        if excess > 0:  # drop the oldest finished ones: a queued request's client still polls
            for old in [k for k, f in self._results.items() if f.done()][:excess]:
                del self._results[old]
        return request_id

    def finished(self, value: Any) -> str:
        """A request id whose result is ``value`` already (a request refused without running,
        e.g. after :meth:`close`: the SDK fetches its answer like any other)."""
        request_id = f"req_{secrets.token_hex(8)}"
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result(value)
        self._results[request_id] = future
        return request_id

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the model thread and wait for it (for the synchronous routes;
        :class:`ShuttingDown` after :meth:`close`, or when ``close`` cancels it)."""
        try:
            return await asyncio.wrap_future(self._queue(fn, *args))
        except asyncio.CancelledError:
            if self._closed:  # cancelled by close(), not by this request's own cancellation
                raise ShuttingDown() from None
            raise

    def pending(self) -> int:
        """How many kept requests are queued or running."""
        return sum(not f.done() for f in self._results.values())

    def known(self, request_id: str) -> bool:
        """Whether ``request_id`` is a request whose result is still kept."""
        return request_id in self._results

    async def wait(
        self, request_id: str, timeout: float = POLL_SECONDS
    ) -> concurrent.futures.Future[Any] | None:
        """The finished future of ``request_id``; ``None`` if still running after ``timeout``."""
        future = self._results[request_id]
        if not future.done():
            waiter = asyncio.wrap_future(future)
            # Mark a failure as seen: it is reported through the concurrent future.
            waiter.add_done_callback(lambda f: f.cancelled() or f.exception())
            await asyncio.wait({waiter}, timeout=timeout)
            if not future.done():
                return None
        return future

    def close(self, *, wait: bool = False) -> None:
        """Stop the model thread (queued work is cancelled; ``wait`` for the running one).

        A cancelled request's ``/retrieve_future`` and a request sent afterwards are answered
        with :data:`SHUTTING_DOWN` (the in-process server closes while uvicorn still answers).
        """
        self._closed = True
        self._thread.shutdown(wait=wait, cancel_futures=True)
