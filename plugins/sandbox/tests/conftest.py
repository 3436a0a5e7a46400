"""Fixtures of the sandbox plugin's tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from hfsdk_sandbox.testing import sandbox_any_isolation  # noqa: F401  (a fixture)


class LoopbackListener:
    """A real listener on 127.0.0.1 that records every connection it accepts.

    ``finish()`` waits out the accept (up to the timeout), closes the socket and
    returns what connected: an empty list means nothing reached it.
    """

    def __init__(self, timeout_s: float) -> None:
        import contextlib
        import socket
        import threading

        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(1)
        self._server.settimeout(timeout_s)
        self.port: int = self._server.getsockname()[1]
        self.accepted: list[object] = []

        def accept() -> None:
            with contextlib.suppress(OSError):  # the timeout: nobody connected
                self.accepted.append(self._server.accept())

        self._thread = threading.Thread(target=accept)
        self._thread.start()

    def finish(self) -> list[object]:
        self._thread.join()
        self._server.close()
        return self.accepted


@pytest.fixture
def loopback_listener() -> Iterator[Callable[[float], LoopbackListener]]:
    """``loopback_listener(timeout_s)``: a :class:`LoopbackListener`, closed after the test."""
    made: list[LoopbackListener] = []

    def make(timeout_s: float) -> LoopbackListener:
        made.append(LoopbackListener(timeout_s))
        return made[-1]

    yield make
    for listener in made:
        listener.finish()
