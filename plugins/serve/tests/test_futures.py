"""The request table: finished results are dropped oldest first; queued ones never."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from hfsdk_serve import futures


def test_requests_still_queued_are_kept_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(futures, "KEPT", 4)
    table = futures.Futures()
    gate = threading.Event()
    try:
        done = [table.submit(lambda: 1) for _ in range(3)]
        for request in done:
            assert asyncio.run(table.wait(request, timeout=10)) is not None  # finished
        table.submit(gate.wait)  # holds the model thread: what follows stays queued
        queued = [table.submit(lambda: 2) for _ in range(6)]
        assert all(table.known(r) for r in queued)  # 10 requests, the bound is 4
        assert not any(table.known(r) for r in done)  # the finished ones made room
    finally:
        gate.set()
        table.close(wait=True)


def test_a_closing_server_answers_its_clients(default_model_dir: Path, tmp_path: Path) -> None:
    """Closing the app while uvicorn still answers (the in-process server's order): a request
    cancelled in the queue and a post after the close come back as failed requests, a
    synchronous route as a 410, all one line saying the server is shutting down, instead of
    500s (and 503s) the SDK retries until its timeout."""
    import tinker
    from tinker import types

    from .conftest import LOCAL_KEY, start

    served = start(default_model_dir, tmp_path)
    gate = threading.Event()
    closing = threading.Thread(target=served.app.close)
    try:
        client = tinker.ServiceClient(base_url=served.url, api_key=LOCAL_KEY)
        trainer = client.create_lora_training_client(
            base_model=str(default_model_dir), rank=4
        ).result()
        tokens = served.tokenizer.encode("3 + 5 = 8")
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(tokens[:-1]),
            loss_fn_inputs={"target_tokens": tokens[1:]},
        )
        served.app.futures.submit(gate.wait)  # holds the model thread
        queued = trainer.forward_backward([datum], "cross_entropy")
        deadline = time.monotonic() + 10
        while served.app.futures.pending() < 2:  # the post has reached the queue
            assert time.monotonic() < deadline, "the forward_backward never arrived"
            time.sleep(0.02)
        closing.start()  # cancels the queued request, waits for the held one
        with pytest.raises(tinker.RequestFailedError, match="server shutting down") as err:
            queued.result(timeout=10)
        assert "Traceback" not in str(err.value)
        started = time.monotonic()
        with pytest.raises(tinker.RequestFailedError, match="server shutting down"):
            trainer.forward_backward([datum], "cross_entropy").result(timeout=10)
        assert time.monotonic() - started < 5  # answered, not retried until a timeout
        # Closing the client finishes its session: a synchronous route, refused at once.
        with pytest.raises(tinker.APIStatusError, match="server shutting down") as gone:
            client.__exit__(None, None, None)
        assert gone.value.status_code == 410
    finally:
        gate.set()
        if closing.is_alive():
            closing.join()
        served.server.should_exit = True
        if served.thread is not None:
            served.thread.join(timeout=30)
        if not closing.ident:  # the test failed before the close
            served.app.close()
