"""Before the first step: which isolation this run's model code gets, said once."""

from __future__ import annotations

from collections.abc import Iterable

from hfsdk_sandbox.runner import Isolation, set_isolation, unavailable_line

SANDBOXED_TOOLS = frozenset({"python"})
SANDBOXED_REWARDS = frozenset({"code_tests"})


def sandbox_notice(
    isolation: Isolation, tool_names: Iterable[str], reward_names: Iterable[str]
) -> str | None:
    """Set the run's isolation mode; one line when its model code would be refused or weak.

    The mode reaches the processes started afterwards (workers, Ray's local
    instance) through ``HFSDK_SANDBOX_ISOLATION``. ``None`` when the run runs
    no model code (no ``python`` tool, no ``code_tests`` reward) or bubblewrap works.
    """
    set_isolation(isolation)
    runs_code = bool(SANDBOXED_TOOLS & set(tool_names)) or bool(
        SANDBOXED_REWARDS & set(reward_names)
    )
    return unavailable_line(isolation) if runs_code else None
