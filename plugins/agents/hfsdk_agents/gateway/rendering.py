"""Token ids of a whole conversation: a segment's prompt.

A segment's prompt is the only place the gateway renders more than new
messages: the first request of a trajectory (when it is not the dataset row's
own prompt, whose ids are used as they are) and a conversation whose earlier
turns the agent changed. With a chat template it is the template's rendering
with ``add_generation_prompt``; without one, the plain rendering the prompt
datasets use (docs/migrating.md): a lone user message is its text, anything
else ``role: content`` lines and ``assistant:`` (an assistant turn's tool calls in the
run parser's format, a tool result in the plain renderer's ``<tool_response>`` form).
Tool results and the messages after the first assistant turn keep special-token strings
as plain text, as the renderers' context turns do (:mod:`hfsdk_agents.content_tokens`), so a
session's tokens and a fresh rendering of its conversation agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hfsdk_agents.content_tokens import (
    holds_special,
    ids_of,
    mark,
    marked_ids,
    outside_messages,
    special_strings,
    stand_ins,
    template_ids,
    with_added_specials,
)
from hfsdk_agents.gateway.messages import Message, for_template
from hfsdk_agents.trajectory import PlainRenderer

PLAIN_TOOL_TEMPLATE: str = attrs.fields(PlainRenderer).template.default
"""The plain renderer's tool-result template (`` <tool_response> {content} </tool_response>``)."""


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
    chat = for_template(messages)
    outside = outside_messages(chat)
    if use_template:
        return template_ids(tokenizer, chat, plain=outside, add_generation_prompt=True, tools=tools)
    if len(messages) == 1 and messages[0]["role"] == "user":
        return ids_of(tokenizer(messages[0]["content"])["input_ids"])
    # The special-token strings inside outside contents stand in as sentinels, tokenized plain.
    specials = special_strings(tokenizer)
    marked = {i for i in outside if holds_special(chat[i].get("content"), specials)}
    marks = stand_ins(specials) if marked else {}
    lines = [
        _plain_line(
            {**m, "content": mark(m["content"], marks)} if i in marked else m, parser, tool_template
        )
        for i, m in enumerate(chat)
    ]
    text = "\n".join([*lines, "assistant:"])
    if not marked:
        return ids_of(tokenizer(text)["input_ids"])
    return with_added_specials(tokenizer, marked_ids(tokenizer, text, marks))


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
