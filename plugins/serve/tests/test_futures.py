"""The request table: finished results are dropped oldest first; queued ones never."""

from __future__ import annotations

import asyncio
import threading

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
