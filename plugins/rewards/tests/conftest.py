"""Fixtures of the rewards plugin's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk_sandbox.testing import sandbox_any_isolation  # noqa: F401  (a fixture)


@pytest.fixture(autouse=True)
def _fresh_plugin_manager(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test sees a plugin manager built from its own environment."""
    for var in ("HFSDK_LOAD_PLUGINS", "HFSDK_DISABLE_PLUGINS", "HFSDK_TRACE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    reset_plugin_manager()
    yield
    reset_plugin_manager()
