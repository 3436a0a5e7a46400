"""Pytest fixtures tests of the core and of plugins share; import them into a conftest.

Kept out of the package's ``__init__`` so that importing :mod:`hfsdk_testing` does not
import pytest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hfsdk import reset_plugin_manager


@pytest.fixture(autouse=True)
def fresh_plugin_manager(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test sees a plugin manager built from its own environment (no plugin loading,
    disabling or tracing variables left from the caller's shell)."""
    for var in ("HFSDK_LOAD_PLUGINS", "HFSDK_DISABLE_PLUGINS", "HFSDK_TRACE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    reset_plugin_manager()
    yield
    reset_plugin_manager()
