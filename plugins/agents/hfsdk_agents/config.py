"""``rollout.multi_turn``: agent loops with tools instead of one generate call.

Multi-turn rollouts are on when ``tools`` names a tool or ``agent_loop`` is set;
the actor worker then runs the agent loop on its prompts (``docs/agents.md``).
The plugin contributes this class as the ``multi_turn`` sub-section of the
``rollout`` config (``hfsdk_register_rollout_sections``); code reads it with
:func:`multi_turn_config` (``rollout_config.section(MultiTurnConfig)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from hfsdk import absolute_file_spec, help_field

_SPEC_KEYS = ("fn", "verl_class")
"""The keys of a tool mapping that name a function or class (``file.py:name`` among them)."""


def _absolute_tools(tools: Any) -> Any:
    """Each tool entry through :func:`~hfsdk.absolute_file_spec` (a mapping: fn, verl_class)."""
    if not isinstance(tools, list | tuple):
        return tools  # the loader words the error
    return tuple(
        {key: absolute_file_spec(v) if key in _SPEC_KEYS else v for key, v in tool.items()}
        if isinstance(tool, Mapping)
        else absolute_file_spec(tool)
        for tool in tools
    )


@attrs.frozen(kw_only=True)
class MultiTurnConfig:
    """Tools, the agent loop and its limits (all off by default: one generate call)."""

    tools: tuple[Any, ...] = help_field(
        "Tools the model may call: registered names (hfsdk list tools), module:fn, file.py:fn, "
        "or {fn: ..., name: ..., schema: {...}}; non-empty turns multi-turn rollouts on.",
        default=(),
        converter=_absolute_tools,
    )
    agent_loop: str | None = help_field(
        "Agent loop: a registered name (hfsdk list agent-loops), module:Class or "
        "file.py:Class; null: gateway when agent is given, tool_loop when tools are given, "
        "else single-turn generation.",
        default=None,
        converter=absolute_file_spec,
    )
    parser: str = help_field(
        "Tool-call format of the model's text (hfsdk list tool-parsers): hermes "
        "(<tool_call>{json}</tool_call>) or llama_function (<function=NAME>{json}</function>).",
        default="hermes",
    )
    renderer: Literal["auto", "chat_template", "plain"] = help_field(
        "How tool outputs become tokens: the tokenizer's chat template, the plain "
        "' <tool_response> ... </tool_response>' rendering, or auto (the template if any).",
        default="auto",
        validator=attrs.validators.in_(("auto", "chat_template", "plain")),
    )
    max_turns: int = help_field(
        "Model turns per trajectory at most.", default=4, validator=attrs.validators.ge(1)
    )
    max_response_tokens: int = help_field(
        "Token budget of a trajectory after its prompt (model and tool tokens); also the "
        "width of the responses.",
        default=256,
        validator=attrs.validators.ge(1),
    )
    max_tokens_per_turn: int | None = help_field(
        "Most tokens one model turn may generate; null: what is left of the budget.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
    )
    tool_timeout_s: float = help_field(
        "Wall-clock limit of one tool call in seconds; past it the model reads a timeout error "
        "and the tool's worker process is killed (docs/agents.md).",
        default=10.0,
        validator=attrs.validators.gt(0.0),
    )
    max_tool_output_chars: int = help_field(
        "Longest tool output the model reads; longer ones are cut and count as errors.",
        default=2000,
        validator=attrs.validators.ge(1),
    )
    stop_token_ids: tuple[int, ...] = help_field(
        "Extra token ids that end a model turn (besides EOS and a one-token call end marker).",
        default=(),
    )
    max_concurrent: int = help_field(
        "Trajectories in flight at once on one actor rank.",
        default=256,
        validator=attrs.validators.ge(1),
    )
    serving: Literal["request", "turn"] = help_field(
        "How turns reach the rollout: request (each turn as soon as its trajectory is ready, "
        "when the rollout batches requests itself: its serves_requests, docs/agents.md) or "
        "turn (all trajectories' turns in one generate call each: a slow tool holds up the "
        "turn).",
        default="request",
        validator=attrs.validators.in_(("request", "turn")),
    )
    agent: str | None = help_field(
        "An agent program served by the OpenAI-compatible gateway (docs/agents.md): a "
        "registered name (hfsdk_register_agents), module:fn or path/file.py:fn, called as "
        "agent(base_url, row) -> reward | None; selects the gateway agent loop.",
        default=None,
        converter=absolute_file_spec,
    )
    agent_deadline_s: float = help_field(
        "Wall-clock limit of one gateway agent in seconds; past it its trajectory is dropped.",
        default=300.0,
        validator=attrs.validators.gt(0.0),
    )
    loop_args: dict[str, Any] = help_field(
        "Keyword arguments of a custom agent loop's constructor.", factory=dict
    )
    environment: str | None = help_field(
        "Environment every row runs in (hfsdk_register_environments name, module:Class or "
        "file.py:Class; docs/agents.md, Environments); turns multi-turn rollouts on.",
        default=None,
        converter=absolute_file_spec,
    )
    environment_column: str | None = help_field(
        "Dataset column naming each row's environment (instead of one environment for all "
        "rows); turns multi-turn rollouts on.",
        default=None,
    )

    @property
    def active(self) -> bool:
        """Whether rollouts are multi-turn."""
        return (
            bool(self.tools)
            or self.agent_loop is not None
            or self.agent is not None
            or self.uses_environments
        )

    @property
    def uses_environments(self) -> bool:
        """Whether rows run in environments (``environment`` or ``environment_column``)."""
        return self.environment is not None or self.environment_column is not None

    @property
    def loop_name(self) -> str:
        """The agent loop to run."""
        if self.agent_loop is not None:
            return self.agent_loop
        if self.agent is not None:
            return "gateway"
        return "environment_loop" if self.uses_environments else "tool_loop"

    def response_budget(self) -> tuple[int, str] | None:
        """The trajectory's token budget owns the responses' width when rollouts are
        multi-turn (:class:`hfsdk.RolloutSection`)."""
        if not self.active:
            return None
        return self.max_response_tokens, "rollout.multi_turn.max_response_tokens"


def multi_turn_config(rollout_config: Any) -> MultiTurnConfig:
    """The ``rollout.multi_turn`` sub-section of a rollout config (defaults when absent)."""
    return rollout_config.section(MultiTurnConfig)
