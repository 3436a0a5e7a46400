"""Fixtures of the agents plugin's tests."""

from __future__ import annotations

from hfsdk_sandbox.testing import sandbox_any_isolation  # noqa: F401
