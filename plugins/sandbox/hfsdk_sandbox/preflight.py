"""Before the first step: which isolation this run's model code gets, said once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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


def sandbox_preflight(config: Any, spec: Any, prepared: Any) -> str | None:
    """The ``sandbox_notice`` preflight check: :func:`sandbox_notice` for a prepared run."""
    tool_names = [str(t.get("function", t).get("name", "")) for t in prepared.tools]
    reward_names = [str(f.name) for s in prepared.signal_configs.values() for f in s.functions]
    section = config.sections.get("sandbox")  # configs pickled before the section existed
    return sandbox_notice(section.isolation if section else "os", tool_names, reward_names)
