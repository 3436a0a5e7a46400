"""torch.distributed rendezvous and transports of a one-node world, on the loopback address.

A ``TCPStore`` made the usual way listens on every interface (``::``), and
gloo / NCCL pick a routable interface for their sockets; a world whose ranks
all live on one machine needs neither. :func:`loopback_store` binds the
store's socket to ``127.0.0.1`` itself (``master_listen_fd``), and
:func:`keep_transports_local` points gloo and NCCL at the loopback interface,
unless the user chose interfaces (``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME``).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
_IFF_LOOPBACK = 0x8
_TRANSPORT_ENV = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def loopback_interface() -> str:
    """The loopback interface's name (``lo`` on Linux; read from ``/sys/class/net``)."""
    root = Path("/sys/class/net")
    try:
        for device in sorted(root.iterdir()):
            try:
                flags = int((device / "flags").read_text().strip(), 16)
            except (OSError, ValueError):
                continue
            if flags & _IFF_LOOPBACK:
                return device.name
    except OSError:
        pass
    return "lo"


def keep_transports_local() -> None:
    """gloo and NCCL sockets on the loopback interface (a choice the user made is kept)."""
    name = loopback_interface()
    for key in _TRANSPORT_ENV:
        os.environ.setdefault(key, name)


def free_loopback_port() -> int:
    """A port free on ``127.0.0.1`` now (for rank 0 to listen on)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def loopback_store(
    world_size: int, *, is_master: bool, port: int = 0, timeout_s: float = 300.0
) -> Any:
    """A ``TCPStore`` listening on ``127.0.0.1:port`` (rank 0) or connecting to it."""
    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    if not is_master:
        return dist.TCPStore(LOOPBACK, port, world_size, is_master=False, timeout=timeout)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, port))
        sock.listen(128)
        port = int(sock.getsockname()[1])
        return dist.TCPStore(
            LOOPBACK,
            port,
            world_size,
            is_master=True,
            timeout=timeout,
            wait_for_workers=False,
            master_listen_fd=sock.detach(),
        )
    finally:
        sock.close()
