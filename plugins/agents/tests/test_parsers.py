"""Tool-call parsers: Hermes/Qwen and Llama function formats, malformed calls."""

from __future__ import annotations

import pytest

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


def test_outputs_answer_the_calls_in_the_turns_order() -> None:
    """A malformed call before a good one: these formats have no call ids, so the n-th
    result must answer the n-th call, and the recorded calls follow the same order."""
    import asyncio
    import types

    from hfsdk import GenerationResult
    from hfsdk_agents.config import MultiTurnConfig
    from hfsdk_agents.loops import AgentContext
    from hfsdk_agents.tools import load_tools
    from hfsdk_agents.trajectory import Trajectory

    text = '<function=add>{"a": 1, "b": }</function><function=add>{"a": 3, "b": 4}</function>'

    async def generate(request: object) -> GenerationResult:
        return GenerationResult(token_ids=(5,), logprobs=(0.0,), finish_reason="stop")

    ctx = AgentContext(
        generate=generate,
        tokenizer=types.SimpleNamespace(decode=lambda ids, skip_special_tokens: text),
        tools=load_tools(["add"]),
        parser=llama_function_parser,
        renderer=None,
        config=MultiTurnConfig(),
        stop_token_ids=(),
    )
    made = asyncio.run(ctx.model_turn(Trajectory(prompt_ids=(1,))))
    assert made is not None
    segment, parsed = made
    outputs = asyncio.run(ctx.run_tools(parsed))
    error = "the tool call is not valid JSON (Expecting value at position 14)"
    assert [o.content for o in outputs] == [f"Error: {error}", "7"]
    assert [o.ok for o in outputs] == [False, True]
    assert segment.tool_calls == [
        {"malformed": error},
        {"name": "add", "arguments": {"a": 3, "b": 4}},
    ]


def test_parsed_turn_items_must_match_its_calls_and_errors() -> None:
    from hfsdk_agents.parsers import ParsedTurn

    call = ToolCall(name="add", arguments={})
    assert ParsedTurn(calls=(call,), errors=("bad",)).items == (call, "bad")  # old-style parsers
    assert ParsedTurn.in_order(["bad", call]).items == ("bad", call)
    with pytest.raises(ValueError, match="items"):
        ParsedTurn(calls=(call,), items=("bad",))


def test_calls_inside_thinking_are_not_parsed() -> None:
    """A reasoning model may mention a call while it thinks; only the calls after its
    thinking (or before an unclosed <think>) are made."""
    call = '<tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>'
    later = '<tool_call>{"name": "add", "arguments": {"a": 7, "b": 5}}</tool_call>'
    add = ToolCall(name="add", arguments={"a": 7, "b": 5})
    closed = hermes_parser(f"<think>\nI could write {call} here.\n</think>\n\n{later}")
    assert closed.items == (add,)
    assert closed.content == f"<think>\nI could write {call} here.\n</think>"
    assert not hermes_parser(f"<think>\nI could write {call}").wants_tools  # unclosed
    assert hermes_parser(f"{later}<think>\n{call}").items == (add,)
    # the prompt may open the block: everything up to the last </think> is thinking
    assert hermes_parser(f"I could write {call}\n</think>\n\n{later}").items == (add,)
    fn = '<function=add>{"a": 3, "b": 4}</function>'
    assert not llama_function_parser(f"<think>{fn}</think>The answer is 7.").wants_tools


def test_arguments_nested_past_the_depth_bound_are_a_malformed_call() -> None:
    """JSON that decodes but nests hundreds of levels deep would crash pickling (the tool
    worker, the rollout dump, Ray): it never becomes a call's arguments."""
    import pickle

    from hfsdk_agents.parsers import MAX_JSON_DEPTH

    def call(depth: int) -> str:
        nested = "[" * depth + "]" * depth
        return f'<tool_call>{{"name": "add", "arguments": {{"a": {nested}}}}}</tool_call>'

    for depth in (500, 900):
        parsed = hermes_parser(call(depth))
        assert parsed.calls == () and len(parsed.errors) == 1
        assert parsed.errors[0].startswith("the tool call is not JSON a tool can take")
        assert f"deeper than {MAX_JSON_DEPTH} levels" in parsed.errors[0]
        pickle.dumps(parsed)  # nothing in the turn is too deep to send on
    # brackets inside strings are text, not nesting; a call within the bound is a call
    text = "[" * 1000
    parsed = hermes_parser(
        f'<tool_call>{{"name": "echo", "arguments": {{"t": "{text}"}}}}</tool_call>'
    )
    assert parsed.calls == (ToolCall(name="echo", arguments={"t": text}),)
    assert hermes_parser(call(MAX_JSON_DEPTH - 3)).calls
    assert (
        len(llama_function_parser(f"<function=add>{'[' * 500}{']' * 500}</function>").errors) == 1
    )


def test_an_unclosed_json_string_is_parsed_in_linear_time() -> None:
    """A call whose string never closes (``"\\"\\"\\"...``) took 20 s for 40k characters,
    in C on the event loop that serves every trajectory: the controller froze."""
    import time

    for end in ("", "\\"):  # a lone backslash last must not escape the bound either
        text = '<tool_call>{"name":"f","arguments":"' + '\\"' * 20_000 + end + "</tool_call>"
        start = time.perf_counter()
        parsed = hermes_parser(text)
        assert time.perf_counter() - start < 1.0
        assert parsed.calls == () and len(parsed.errors) == 1
        assert parsed.errors[0].startswith("the tool call is not valid JSON (Unterminated string")
    # brackets in a string that never closes are text, as in one that does
    unclosed = '<tool_call>{"name": "f", "arguments": "' + "[" * 500 + "</tool_call>"
    assert "not valid JSON" in hermes_parser(unclosed).errors[0]


def test_many_function_markers_are_parsed_in_linear_time() -> None:
    """Each ``<function=`` scanned past the later ones for its name's ``>``: 8000 markers
    (80k characters) took 31 s."""
    import time

    text = "<function=" * 8000
    start = time.perf_counter()
    parsed = llama_function_parser(text)
    assert time.perf_counter() - start < 1.0
    assert parsed.items == () and parsed.content == text
    # a name never runs into a later marker: the call is the one that is well formed
    parsed = llama_function_parser("<function=" * 3 + '<function=add>{"a": 1}</function>')
    assert parsed.items == (ToolCall(name="add", arguments={"a": 1}),)
    assert parsed.content == "<function=" * 3
