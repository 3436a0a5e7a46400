"""Fixtures of the rewards plugin's tests."""

from __future__ import annotations

from hfsdk_sandbox.testing import sandbox_any_isolation  # noqa: F401  (a fixture)
from hfsdk_testing.fixtures import fresh_plugin_manager  # noqa: F401  (autouse)
