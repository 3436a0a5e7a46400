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


@hookspec
def hfsdk_register_environments(register: Register) -> None:
    """Register environments for multi-turn rollouts: ``register(name, cls)``.

    ``cls`` is an environment class (``hfsdk_agents.environments.Environment`` or
    any class of that shape): ``tools`` names its tool methods (schemas from their
    type hints and docstrings), ``reset(row) -> str`` gives the first observation,
    ``reward() -> float`` the trajectory's reward, ``close()`` frees it; a ``done``
    attribute ends the episode. One instance per trajectory. Configs select it with
    ``rollout.multi_turn.environment`` or per row through
    ``rollout.multi_turn.environment_column``. See docs/agents.md, "Environments".
    """


@hookspec
def hfsdk_register_tools(register: Register) -> None:
    """Register tools agent loops may call: ``register(name, fn, schema=None)``.

    ``fn`` is a plain sync or ``async`` function (or an ``hfsdk_agents.Tool``); its
    OpenAI-style schema comes from its type hints and docstring unless ``schema=``
    gives one. Configs name it in ``rollout.multi_turn.tools`` (the agents plugin's
    sub-section). See docs/agents.md.
    """


@hookspec
def hfsdk_register_agent_loops(register: Register) -> None:
    """Register agent loops: ``register(name, cls)``, ``cls`` an ``hfsdk_agents.AgentLoop``.

    One async ``run(prompt_ids, row, ctx, *, seed)`` per trajectory; chosen with
    ``rollout.multi_turn.agent_loop``. See docs/agents.md.
    """


@hookspec
def hfsdk_register_tool_parsers(register: Register) -> None:
    """Register tool-call parsers: ``register(name, fn, end_marker=None)``.

    ``fn(text) -> hfsdk_agents.ParsedTurn``; ``end_marker`` is the text closing a call (a
    one-token marker ends the model's turn). Chosen with ``rollout.multi_turn.parser``.
    """
