"""Test helpers for code that runs programs in the sandbox (its own tests and its users')."""

from __future__ import annotations

import pytest

from hfsdk_sandbox.bwrap import unavailable_reason
from hfsdk_sandbox.runner import ISOLATION_ENV

# Switches the audit hook off the way an attacker would: find the hook through the garbage
# collector and replace its `refuse` cell with a no-op. Every escape program starts with it and
# prints whether it worked, so a test cannot pass because the hook stopped the trick.
DISARM_GUARD = """
import gc, sys
_found = False
for _o in gc.get_objects():
    if getattr(_o, "__name__", "") == "hook" and "_PROCESS_EVENTS" in getattr(_o, "__globals__", {}):
        for _cell in _o.__closure__ or ():
            if callable(_cell.cell_contents):
                _cell.cell_contents = lambda what: None
                _found = True
print("guard disarmed" if _found else "guard not found", flush=True)
"""  # noqa: E501


@pytest.fixture
def sandbox_any_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests of what sandboxed programs compute (not of the isolation) run where bubblewrap
    cannot start too: there with ``process`` isolation, as ``sandbox.isolation: process`` would.

    Import it into a ``conftest.py`` (``from hfsdk_sandbox.testing import
    sandbox_any_isolation``) and use it with ``pytest.mark.usefixtures``.
    """
    if unavailable_reason() is not None:
        monkeypatch.setenv(ISOLATION_ENV, "process")
