"""The fault points where a reliability test may break a run (``hfsdk_fault_point``).

The faults plugin answers; without it, or with :data:`FAULT_ENV` unset, none fires.
"""

from __future__ import annotations

import os

FAULT_ENV = "HFSDK_FAULT_INJECT"
"""The variable that asks for faults; the controller passes it on to its workers."""


def take_fault(point: str, step: int) -> bool:
    """Whether the caller is to inject ``point``'s fault at ``step`` (``hfsdk_fault_point``)."""
    if not os.environ.get(FAULT_ENV):  # the normal case: one lookup, no plugin asked
        return False
    from hfsdk.core.plugin_manager import get_plugin_manager

    return bool(get_plugin_manager().hook.hfsdk_fault_point(point=point, step=step))
