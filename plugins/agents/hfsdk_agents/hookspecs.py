"""Hook specifications the agents plugin adds (through ``hfsdk_addhooks``)."""

from __future__ import annotations

import pluggy

from hfsdk import Register

hookspec = pluggy.HookspecMarker("hfsdk")


@hookspec
def hfsdk_register_agents(register: Register) -> None:
    """Register gateway agents: ``register(name, fn)``, ``fn(base_url, row) -> float | None``.

    ``fn`` (sync or ``async``) is an agent program written against the OpenAI API:
    it talks to the policy at ``base_url`` (an OpenAI-compatible endpoint served
    for its trajectory alone) and may return the trajectory's reward. Chosen with
    ``rollout.multi_turn.agent``. See docs/agents.md, "The OpenAI-compatible gateway".
    """
