"""Read a program's stdout and stderr from pipes, with a byte cap and a deadline.

Nothing is read back through a path the program could replace (a symlink to a
secret, ``/dev/zero``, a FIFO that never ends): the parent holds the read
ends of two pipes and stops at whichever comes first — both closed, more than
``cap`` bytes on either, the deadline, or the launched process gone (a
grandchild it left holding the pipes does not make a finished run a timeout).
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable

import attrs

_CHUNK = 65536
_POLL_S = 0.05  # how often ``exited`` is asked while the pipes stay open


@attrs.frozen
class Drained:
    """What came through the pipes and why reading stopped."""

    stdout: bytes
    stderr: bytes
    over_cap: bool
    timed_out: bool


def drain(
    stdout_fd: int,
    stderr_fd: int,
    *,
    cap: int,
    deadline: float,
    exited: Callable[[], bool] | None = None,
) -> Drained:
    """Read both pipes until they close, one passes ``cap`` bytes, or ``deadline`` (monotonic).

    ``exited``: whether the launched process has ended; once it has, what is already in
    the pipes is read and reading stops, even if something it left behind holds them open.
    Each stream keeps at most ``cap`` bytes; the descriptors are closed on return.
    """
    buffers = {stdout_fd: bytearray(), stderr_fd: bytearray()}
    over_cap = timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        try:
            finishing = False
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                if exited is not None and not finishing and exited():
                    finishing = True  # one more pass over what is buffered, then stop
                wait = 0.0 if finishing else left if exited is None else min(left, _POLL_S)
                ready = selector.select(timeout=wait)
                if finishing and not ready:
                    break
                for key, _ in ready:
                    fd = key.fd
                    try:
                        chunk = os.read(fd, _CHUNK)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        selector.unregister(fd)
                        continue
                    buffers[fd] += chunk
                    if len(buffers[fd]) > cap:
                        over_cap = True
                if over_cap:
                    break
        finally:
            for fd in buffers:
                os.close(fd)
    return Drained(
        stdout=bytes(buffers[stdout_fd][:cap]),
        stderr=bytes(buffers[stderr_fd][:cap]),
        over_cap=over_cap,
        timed_out=timed_out,
    )
