"""Tool-call parsers: Hermes/Qwen and Llama function formats, malformed calls."""

from __future__ import annotations

from hfsdk.core.plugin_manager import get_registry
from hfsdk_agents.parsers import ToolCall, hermes_parser, llama_function_parser


def test_hermes_calls_and_content() -> None:
    text = (
        'Let me add. <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
        '<tool_call>\n{"name": "mul", "arguments": "{\\"a\\": 3}"}\n</tool_call>'
    )
    parsed = hermes_parser(text)
    assert parsed.calls == (
        ToolCall(name="add", arguments={"a": 1, "b": 2}),
        ToolCall(name="mul", arguments={"a": 3}),
    )
    assert parsed.errors == ()
    assert parsed.content == "Let me add."


def test_hermes_malformed_calls_are_errors() -> None:
    parsed = hermes_parser('<tool_call>{"name": "add", "arguments": {</tool_call><tool_call>{"a"')
    assert parsed.calls == ()
    assert len(parsed.errors) == 2
    assert "not valid JSON" in parsed.errors[0]
    assert "not closed" in parsed.errors[1]
    assert hermes_parser("<tool_call>[1, 2]</tool_call>").errors[0].startswith("a tool call must")
    assert not hermes_parser("The answer is 3.").wants_tools


def test_llama_function_format() -> None:
    parsed = llama_function_parser('x <function=add>{"a": 1, "b": 2}</function> y')
    assert parsed.calls == (ToolCall(name="add", arguments={"a": 1, "b": 2}),)
    assert parsed.content == "x  y"
    assert llama_function_parser("<function=add>{oops}</function>").errors


def test_parsers_are_registered_with_their_end_markers() -> None:
    registry = get_registry("tool_parsers")
    assert registry["hermes"].impl is hermes_parser
    assert registry["hermes"].extra["end_marker"] == "</tool_call>"
    assert registry["llama_function"].extra["end_marker"] == "</function>"


def test_json_that_python_refuses_to_decode_is_a_malformed_call_not_a_crash() -> None:
    huge = "1" * 5000  # over Python's 4300-digit limit for int()
    deep = "[" * 100_000  # past the recursion limit
    for body in (f'{{"name": "add", "arguments": {{"a": {huge}}}}}', deep):
        parsed = hermes_parser(f"<tool_call>{body}</tool_call>")
        assert parsed.calls == () and len(parsed.errors) == 1
        assert parsed.errors[0].startswith("the tool call is not JSON a tool can take")
    as_string = '{"name": "add", "arguments": "{\\"a\\": ' + huge + '}"}'
    assert len(hermes_parser(f"<tool_call>{as_string}</tool_call>").errors) == 1
    assert len(llama_function_parser(f"<function=add>{deep}</function>").errors) == 1
