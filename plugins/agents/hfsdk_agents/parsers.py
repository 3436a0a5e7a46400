"""Tool-call parsers: the model's text of one turn → the tool calls it makes.

A parser is registered by name (``hfsdk_register_tool_parsers``) and chosen with
``rollout.multi_turn.parser``. Built-ins:

- ``hermes`` (Hermes / Qwen): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  any number per turn;
- ``llama_function``: ``<function=NAME>{json arguments}</function>`` (Llama 3.1's
  custom-tool format), any number per turn.

A call whose body is not valid JSON (or lacks a name, or nests deeper than
:data:`MAX_JSON_DEPTH`) is returned in ``errors``: the loop answers it with an
error tool turn, as for a failing tool.
``items`` keeps the calls and errors in the order the model wrote them: these
formats carry no call ids, so a result's position is what ties it to its call.
Calls inside the model's reasoning (``<think>…</think>``, closed or not) are not
parsed: a model may mention a call while it thinks; it makes one after.
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
    """The tool calls of one model turn, the malformed ones' messages, and the plain text.

    ``items``: the calls (:class:`ToolCall`) and errors (``str``) in the turn's order; the
    loop answers in that order. Left out, it is the calls, then the errors.
    :meth:`in_order` builds a turn from ``items``.
    """

    calls: tuple[ToolCall, ...] = ()
    errors: tuple[str, ...] = ()
    content: str = ""
    items: tuple[ToolCall | str, ...] = attrs.field()

    @items.default
    def _calls_then_errors(self) -> tuple[ToolCall | str, ...]:
        return (*self.calls, *self.errors)

    def __attrs_post_init__(self) -> None:
        # Three views of one turn must agree, or the loop would answer calls it never made.
        calls = tuple(i for i in self.items if isinstance(i, ToolCall))
        errors = tuple(i for i in self.items if not isinstance(i, ToolCall))
        if calls != self.calls or errors != self.errors:
            raise ValueError("ParsedTurn.items must hold exactly its calls and errors")

    @classmethod
    def in_order(cls, items: list[ToolCall | str], content: str = "") -> ParsedTurn:
        """The turn whose calls and errors are ``items``, in that order."""
        calls = tuple(i for i in items if isinstance(i, ToolCall))
        errors = tuple(i for i in items if not isinstance(i, ToolCall))
        return cls(calls=calls, errors=errors, content=content, items=tuple(items))

    @property
    def wants_tools(self) -> bool:
        """Whether the turn tried to call a tool (well-formed or not)."""
        return bool(self.calls or self.errors)


ToolParser = Callable[[str], ParsedTurn]
"""``parser(text) -> ParsedTurn``."""


MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a tool call's JSON may have. Python decodes
about 990 levels, but what is that deep cannot be pickled (the tool worker, Ray) nor dumped
(``trainer.rollout_dump``): deeper is a malformed call, and its arguments are never kept."""

# A JSON string (escapes included): brackets inside one are text, not nesting. One that
# never closes runs to the end (the JSON is invalid anyway): requiring the closing quote
# made every later quote a new start that scanned to the end, quadratic in C on the
# rollout's event loop. A lone backslash may end it too (else that case stays quadratic);
# the possessive ``*+`` never backtracks into the escapes.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


def _json_depth(body: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in ``body`` (a loop: no recursion to overflow)."""
    depth = deepest = 0
    for bracket in _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", body)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _load_json(body: str) -> tuple[Any, str | None]:
    if _json_depth(body) > MAX_JSON_DEPTH:
        return None, (
            f"the tool call is not JSON a tool can take (it nests deeper than {MAX_JSON_DEPTH} "
            "levels of arrays and objects)"
        )
    try:
        return json.loads(body), None
    except json.JSONDecodeError as err:
        return None, f"the tool call is not valid JSON ({err.msg} at position {err.pos})"
    except (ValueError, RecursionError) as err:  # an integer over 4300 digits; deep nesting
        return None, f"the tool call is not JSON a tool can take ({str(err)[:120]})"


def _outside_thinking(text: str) -> tuple[str, str, str]:
    """``text`` as (before, thinking, after); calls are parsed in ``before`` and ``after`` only.

    Everything up to the last ``</think>`` is thinking (the prompt may have opened the
    block), and an unclosed ``<think>`` runs to the end of the turn.
    """
    close = text.rfind("</think>")
    if close >= 0:
        end = close + len("</think>")
        return "", text[:end], text[end:]
    start = text.find("<think>")
    if start >= 0:
        return text[:start], text[start:], ""
    return text, "", ""


def _calls_outside_thinking(pattern: re.Pattern[str], text: str) -> tuple[list[Any], str]:
    """The matches of ``pattern`` outside the thinking, in order, and ``text`` without them."""
    before, thinking, after = _outside_thinking(text)
    matches = [*pattern.finditer(before), *pattern.finditer(after)]
    return matches, pattern.sub("", before) + thinking + pattern.sub("", after)


_HERMES = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)


def hermes_parser(text: str) -> ParsedTurn:
    """``<tool_call>{"name": "f", "arguments": {...}}</tool_call>`` blocks (Hermes, Qwen)."""
    items: list[ToolCall | str] = []  # calls and errors in the turn's order
    matches, content = _calls_outside_thinking(_HERMES, text)
    for match in matches:
        body, closed = match.group(1).strip(), bool(match.group(2))
        if not closed:
            items.append("the tool call is not closed with </tool_call>")
            continue
        data, error = _load_json(body)
        if error is not None:
            items.append(error)
        elif not isinstance(data, dict) or not isinstance(data.get("name"), str):
            items.append('a tool call must be a JSON object with a "name" string')
        else:
            arguments = data.get("arguments", data.get("parameters", {}))
            if isinstance(arguments, str):  # some models send the arguments as a JSON string
                arguments, error = _load_json(arguments)
                if error is not None:
                    items.append(error)
                    continue
            items.append(ToolCall(name=data["name"], arguments=arguments))
    return ParsedTurn.in_order(items, content.strip())


# A name stops at ``<``: otherwise each ``<function=`` scanned past every later one for its
# ``>``, quadratic in the number of markers.
_FUNCTION = re.compile(r"<function=([^<>\s]*)>(.*?)(</function>|$)", re.DOTALL)


def llama_function_parser(text: str) -> ParsedTurn:
    """``<function=NAME>{"arg": ...}</function>`` blocks (Llama 3.1 custom tools)."""
    items: list[ToolCall | str] = []  # calls and errors in the turn's order
    matches, content = _calls_outside_thinking(_FUNCTION, text)
    for match in matches:
        name, body, closed = match.group(1), match.group(2).strip(), bool(match.group(3))
        if not closed:
            items.append("the tool call is not closed with </function>")
            continue
        if not name:
            items.append("the tool call names no function (<function=NAME>)")
            continue
        data, error = _load_json(body or "{}")
        if error is not None:
            items.append(error)
        else:
            items.append(ToolCall(name=name, arguments=data))
    return ParsedTurn.in_order(items, content.strip())


BUILTIN_PARSERS: dict[str, ToolParser] = {
    "hermes": hermes_parser,
    "llama_function": llama_function_parser,
}
"""The parsers the core registers."""

CALL_END_MARKERS: dict[str, str] = {"hermes": "</tool_call>", "llama_function": "</function>"}
"""The text that closes a call in each built-in format (a stop string for the loop)."""
