"""Token ids of a whole conversation: a segment's prompt.

A segment's prompt is the only place the gateway renders more than new
messages: the first request of a trajectory (when it is not the dataset row's
own prompt, whose ids are used as they are) and a conversation whose earlier
turns the agent changed. With a chat template it is the template's rendering
with ``add_generation_prompt``; without one, the plain rendering the prompt
datasets use (docs/migrating.md): a lone user message is its text, anything
else ``role: content`` lines and ``assistant:`` (an assistant turn's tool calls in the
run parser's format, a tool result in the plain renderer's ``<tool_response>`` form).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hfsdk_agents.gateway.messages import Message, for_template
from hfsdk_agents.trajectory import PlainRenderer

PLAIN_TOOL_TEMPLATE: str = attrs.fields(PlainRenderer).template.default
"""The plain renderer's tool-result template (`` <tool_response> {content} </tool_response>``)."""


def _ids(value: Any) -> list[int]:
    if isinstance(value, Mapping):  # transformers 5 may return a BatchEncoding
        value = value["input_ids"]
    return [int(t) for t in value]


def render_conversation(
    tokenizer: Any,
    messages: Sequence[Message],
    *,
    use_template: bool,
    tools: Sequence[Mapping[str, Any]] | None = None,
    parser: str = "hermes",
    tool_template: str = PLAIN_TOOL_TEMPLATE,
) -> list[int]:
    """The ids the model reads before answering ``messages`` (see the module docstring);
    without a template, ``parser`` names the tool-call format and ``tool_template`` the tool
    results' (the run's :class:`~hfsdk_agents.trajectory.PlainRenderer` template)."""
    if use_template:
        extra = {"tools": [dict(t) for t in tools]} if tools else {}
        return _ids(
            tokenizer.apply_chat_template(
                for_template(messages), tokenize=True, add_generation_prompt=True, **extra
            )
        )
    if len(messages) == 1 and messages[0]["role"] == "user":
        text = messages[0]["content"]
    else:
        lines = [_plain_line(m, parser, tool_template) for m in for_template(messages)]
        text = "\n".join([*lines, "assistant:"])
    return _ids(tokenizer(text)["input_ids"])


def _plain_call(function: Mapping[str, Any], parser: str) -> str:
    """A tool call as the model writes it in the run parser's format (hermes otherwise)."""
    if parser == "llama_function":
        return f"<function={function['name']}>{json.dumps(function['arguments'])}</function>"
    call = {"name": function["name"], "arguments": function["arguments"]}
    return f"<tool_call> {json.dumps(call)} </tool_call>"


def _plain_line(message: Mapping[str, Any], parser: str, tool_template: str) -> str:
    """``role: content``, with an assistant turn's calls and a tool result in the forms the
    session appends them, so that a re-rendered turn reads what the model saw."""
    role, content = message["role"], str(message.get("content") or "")
    if role == "tool":
        return f"{role}:{tool_template.format(content=content, name=message.get('name', ''))}"
    calls = [_plain_call(c["function"], parser) for c in message.get("tool_calls") or []]
    return f"{role}: " + " ".join(part for part in [content, *calls] if part)


def row_messages(row: Mapping[str, Any]) -> list[Message] | None:
    """The dataset row's prompt as checked messages (``prompt_messages``, else ``raw_prompt``
    as one user message); ``None`` when the row has neither."""
    messages = row.get("prompt_messages")
    if messages is not None:
        if hasattr(messages, "tolist") and not isinstance(messages, list):
            messages = messages.tolist()
        return [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in messages]
    raw = row.get("raw_prompt")
    return None if raw is None else [{"role": "user", "content": str(raw)}]
