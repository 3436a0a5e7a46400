"""Test helpers for code that runs programs in the sandbox (its own tests and its users')."""

from __future__ import annotations

import pytest

from hfsdk_sandbox.bwrap import unavailable_reason
from hfsdk_sandbox.runner import ISOLATION_ENV


@pytest.fixture
def sandbox_any_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests of what sandboxed programs compute (not of the isolation) run where bubblewrap
    cannot start too: there with ``process`` isolation, as ``sandbox.isolation: process`` would.

    Import it into a ``conftest.py`` (``from hfsdk_sandbox.testing import
    sandbox_any_isolation``) and use it with ``pytest.mark.usefixtures``.
    """
    if unavailable_reason() is not None:
        monkeypatch.setenv(ISOLATION_ENV, "process")
