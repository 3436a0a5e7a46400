"""A ``hfsdk serve`` app on loopback, shared by the tests (the model loads once per session).

The server runs in a thread of the test process (uvicorn on a free port); the
tests talk to it only through the real ``tinker`` SDK.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

# The SDK would otherwise post its telemetry to the server (accepted, but noise).
os.environ.setdefault("TINKER_TELEMETRY", "0")


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """The serve tests run with one torch thread, restored afterwards.

    The tiny model's ops are too small to split: on the shared 2-core machine (load ~9)
    one sample call took ~2 s with torch's 2 threads and ~0.08 s with one. Set at import
    time it reached every test of the session, and vLLM's CPU attention refuses a thread
    count that changed under it (``thread_num == thread_num (2 vs. 1)``), then hangs.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


LOCAL_KEY = "tml-local-test"


@attrs.frozen
class Served:
    """A running server: its URL, app, model directory and tokenizer."""

    url: str
    app: Any
    model_dir: Path
    tokenizer: Any
    server: Any
    thread: threading.Thread | None = None

    def stop(self) -> None:
        """Stop uvicorn, wait for its thread, then close the app (``hfsdk serve``'s order).

        Closing first cancels queued work while uvicorn still answers its clients.
        """
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=30)
        self.app.close()


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(model_dir: Path, state_dir: Path, *, api_key: str | None = None) -> Served:
    """Start a server in a thread; stop it with :meth:`Served.stop`."""
    import uvicorn

    from hfsdk import load_tokenizer
    from hfsdk_serve.command import build_app

    app = build_app(model_dir, state_dir, api_key=api_key)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app.asgi, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    return Served(
        f"http://127.0.0.1:{port}", app, Path(model_dir), load_tokenizer(model_dir), server, thread
    )


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    """The built-in task's tiny Llama (built once, cached)."""
    from hfsdk import default_model_dir

    return default_model_dir()


@pytest.fixture(scope="session")
def served(default_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One loopback server for the session."""
    running = start(default_model_dir, tmp_path_factory.mktemp("serve_state"))
    yield running
    running.stop()


@pytest.fixture
def service_client(served: Served) -> Iterator[Any]:
    """A ``tinker.ServiceClient`` of the shared server (closed after the test)."""
    import tinker

    with tinker.ServiceClient(base_url=served.url, api_key=LOCAL_KEY) as client:
        yield client
