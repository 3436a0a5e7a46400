"""Fixtures of the migration plugin's tests."""

from __future__ import annotations

from hfsdk_testing.fixtures import fresh_plugin_manager  # noqa: F401  (autouse)
