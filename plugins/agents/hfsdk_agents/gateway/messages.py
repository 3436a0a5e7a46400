"""Chat messages as the gateway compares and renders them.

An agent sends the whole conversation with every request. The gateway keeps the
messages a session's tokens stand for and compares the new request against them
by :func:`message_key`: role, text and tool calls (name and arguments as JSON
with sorted keys), so an agent that re-serialises the arguments, drops ``null``
fields or changes call ids still matches. :func:`check_messages` turns what
arrived into plain dicts or refuses it in one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk_agents.gateway.errors import bad_request

ROLES = ("system", "developer", "user", "assistant", "tool")

TEMPLATE_ROLES = {"developer": "system"}
"""Roles chat templates read under another name: OpenAI's ``developer`` is its newer name for
``system`` (a Qwen3-style template drops a role it does not know)."""

Message = dict[str, Any]
"""A checked message: ``role``, ``content`` (text), optional ``tool_calls``
(``[{"id", "name", "arguments"}]``, arguments decoded), ``tool_call_id``, ``name``."""


def _text(content: Any, where: str) -> str:
    """A message's content as text (a string, or OpenAI content parts of type text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                raise bad_request(
                    f"{where}: content part {part!r} is not a text part; the gateway serves "
                    "text only ({'type': 'text', 'text': '...'})",
                    code="malformed_messages",
                    param="messages",
                )
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise bad_request(
        f"{where}: content is {type(content).__name__}; expected a string or text parts",
        code="malformed_messages",
        param="messages",
    )


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value  # compared as given; the agent sent what it sent
    return value


def _calls(raw: Any, where: str) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad_request(
            f"{where}: tool_calls is {type(raw).__name__}; expected a list",
            code="malformed_messages",
            param="messages",
        )
    calls = []
    for call in raw:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise bad_request(
                f"{where}: tool call {call!r} has no function name; expected "
                "{'id': ..., 'type': 'function', 'function': {'name': ..., 'arguments': '{...}'}}",
                code="malformed_messages",
                param="messages",
            )
        calls.append(
            {
                "id": call.get("id"),
                "name": function["name"],
                "arguments": _arguments(function.get("arguments", {})),
            }
        )
    return calls


def check_messages(raw: Any) -> list[Message]:
    """The request's ``messages`` as checked dicts; anything malformed is a 400 saying what."""
    if not isinstance(raw, list) or not raw:
        raise bad_request(
            "messages must be a non-empty list of {'role': ..., 'content': ...}",
            code="malformed_messages",
            param="messages",
        )
    out: list[Message] = []
    for index, message in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise bad_request(
                f"{where} is {type(message).__name__}; expected an object with a role",
                code="malformed_messages",
                param="messages",
            )
        role = message.get("role")
        if role not in ROLES:
            raise bad_request(
                f"{where} has role {role!r}; expected one of {', '.join(ROLES)}",
                code="malformed_messages",
                param="messages",
            )
        checked: Message = {"role": role, "content": _text(message.get("content"), where)}
        if role == "assistant":
            calls = _calls(message.get("tool_calls"), where)
            if calls:
                checked["tool_calls"] = calls
        elif "content" not in message or message.get("content") is None:
            raise bad_request(
                f"{where} ({role}) has no content; every {role} message needs its text",
                code="malformed_messages",
                param="messages",
            )
        if role == "tool" and message.get("tool_call_id") is not None:
            checked["tool_call_id"] = str(message["tool_call_id"])
        if isinstance(message.get("name"), str):
            checked["name"] = message["name"]
        out.append(checked)
    return out


def message_key(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What must be equal for two messages to be the same turn (see the module docstring)."""
    calls = tuple(
        (c["name"], json.dumps(c["arguments"], sort_keys=True))
        for c in message.get("tool_calls", ())
    )
    role = TEMPLATE_ROLES.get(message["role"], message["role"])  # rendered alike, so equal
    return (role, message.get("content") or "", calls)


def extends(messages: Sequence[Message], history: Sequence[Message]) -> bool:
    """Whether ``messages`` start with ``history`` (compared by :func:`message_key`)."""
    return len(messages) >= len(history) and all(
        message_key(a) == message_key(b) for a, b in zip(messages, history, strict=False)
    )


def for_template(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as chat templates read them: ``developer`` as ``system``, tool calls with
    decoded arguments, tool messages with the called tool's ``name`` (looked up by
    ``tool_call_id``)."""
    names: dict[str, str] = {}
    out = []
    for message in messages:
        role = TEMPLATE_ROLES.get(message["role"], message["role"])
        rendered: dict[str, Any] = {"role": role, "content": message["content"]}
        calls = message.get("tool_calls")
        if calls:
            for call in calls:
                if call.get("id"):
                    names[str(call["id"])] = call["name"]
            rendered["tool_calls"] = [
                {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls
            ]
        if message["role"] == "tool":
            name = message.get("name") or names.get(str(message.get("tool_call_id")), "")
            rendered["name"] = name
        out.append(rendered)
    return out
