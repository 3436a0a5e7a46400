"""Fixtures of the agents plugin's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def sandbox_any_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The python tool's tests check what a snippet computes, not the isolation: where
    bubblewrap cannot start they run with ``process`` isolation (``sandbox.isolation``)."""
    from hfsdk.core.sandbox.bwrap import unavailable_reason

    if unavailable_reason() is not None:
        monkeypatch.setenv("HFSDK_SANDBOX_ISOLATION", "process")
