"""Hook implementations of the fault-injection plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_fault_point(point: str, step: int) -> bool | None:
    """The fault at a named point of the core or a backend (``HFSDK_FAULT_INJECT``)."""
    from hfsdk_faults.faults import fault_point

    return fault_point(point, step) or None  # None: a later plugin may still answer


@hfsdk.hookimpl
def hfsdk_register_step_observers(register: Register) -> None:
    """Register ``faults``: kills and signals at a step's start, ``step_end`` after its line."""
    from hfsdk_faults.faults import fault_observer

    register("faults", fault_observer)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``fault_points``: an ``HFSDK_FAULT_INJECT`` item no point answers to is
    refused (a typo would inject nothing, and the check it was for would pass)."""
    from hfsdk_faults.faults import check_fault_points

    register("fault_points", check_fault_points)
