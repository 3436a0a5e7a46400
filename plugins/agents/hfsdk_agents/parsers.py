"""Tool-call parsers: the model's text of one turn → the tool calls it makes.

A parser is registered by name (``hfsdk_register_tool_parsers``) and chosen with
``rollout.multi_turn.parser``. Built-ins:

- ``hermes`` (Hermes / Qwen): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  any number per turn;
- ``llama_function``: ``<function=NAME>{json arguments}</function>`` (Llama 3.1's
  custom-tool format), any number per turn.

A call whose body is not valid JSON (or lacks a name) is returned in
``errors``: the loop answers it with an error tool turn, as for a failing tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class ToolCall:
    """One call the model made: the tool's ``name`` and its ``arguments`` (a JSON object)."""

    name: str
    arguments: Any


@attrs.frozen(kw_only=True)
class ParsedTurn:
    """The tool calls of one model turn, the malformed ones' messages, and the plain text."""

    calls: tuple[ToolCall, ...] = ()
    errors: tuple[str, ...] = ()
    content: str = ""

    @property
    def wants_tools(self) -> bool:
        """Whether the turn tried to call a tool (well-formed or not)."""
        return bool(self.calls or self.errors)


ToolParser = Callable[[str], ParsedTurn]
"""``parser(text) -> ParsedTurn``."""


def _load_json(body: str) -> tuple[Any, str | None]:
    try:
        return json.loads(body), None
    except json.JSONDecodeError as err:
        return None, f"the tool call is not valid JSON ({err.msg} at position {err.pos})"
    except (ValueError, RecursionError) as err:  # an integer over 4300 digits; deep nesting
        return None, f"the tool call is not JSON a tool can take ({str(err)[:120]})"


_HERMES = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)


def hermes_parser(text: str) -> ParsedTurn:
    """``<tool_call>{"name": "f", "arguments": {...}}</tool_call>`` blocks (Hermes, Qwen)."""
    calls, errors = [], []
    for match in _HERMES.finditer(text):
        body, closed = match.group(1).strip(), bool(match.group(2))
        if not closed:
            errors.append("the tool call is not closed with </tool_call>")
            continue
        data, error = _load_json(body)
        if error is not None:
            errors.append(error)
        elif not isinstance(data, dict) or not isinstance(data.get("name"), str):
            errors.append('a tool call must be a JSON object with a "name" string')
        else:
            arguments = data.get("arguments", data.get("parameters", {}))
            if isinstance(arguments, str):  # some models send the arguments as a JSON string
                arguments, error = _load_json(arguments)
                if error is not None:
                    errors.append(error)
                    continue
            calls.append(ToolCall(name=data["name"], arguments=arguments))
    content = _HERMES.sub("", text).strip()
    return ParsedTurn(calls=tuple(calls), errors=tuple(errors), content=content)


_FUNCTION = re.compile(r"<function=([^>\s]*)>(.*?)(</function>|$)", re.DOTALL)


def llama_function_parser(text: str) -> ParsedTurn:
    """``<function=NAME>{"arg": ...}</function>`` blocks (Llama 3.1 custom tools)."""
    calls, errors = [], []
    for match in _FUNCTION.finditer(text):
        name, body, closed = match.group(1), match.group(2).strip(), bool(match.group(3))
        if not closed:
            errors.append("the tool call is not closed with </function>")
            continue
        if not name:
            errors.append("the tool call names no function (<function=NAME>)")
            continue
        data, error = _load_json(body or "{}")
        if error is not None:
            errors.append(error)
        else:
            calls.append(ToolCall(name=name, arguments=data))
    content = _FUNCTION.sub("", text).strip()
    return ParsedTurn(calls=tuple(calls), errors=tuple(errors), content=content)


BUILTIN_PARSERS: dict[str, ToolParser] = {
    "hermes": hermes_parser,
    "llama_function": llama_function_parser,
}
"""The parsers the core registers."""

CALL_END_MARKERS: dict[str, str] = {"hermes": "</tool_call>", "llama_function": "</function>"}
"""The text that closes a call in each built-in format (a stop string for the loop)."""
