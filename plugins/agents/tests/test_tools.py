"""Tools: schemas from functions, loading by name / module:fn / file.py:fn, failures as output."""

from __future__ import annotations

import asyncio
import functools
import io
import multiprocessing
import time
from pathlib import Path

import pytest

from hfsdk.core.errors import ConfigError
from hfsdk_agents.tools import (
    Tool,
    ToolError,
    ToolResult,
    call_tool,
    load_tool,
    load_tools,
)


def search(query: str, limit: int = 3, tags: list[str] | None = None) -> list[str]:
    """Search the index.

    Args:
        query: What to look for.
        limit: How many hits at most.

    Returns:
        The hits.
    """
    return [query] * limit


def test_schema_from_hints_and_docstring() -> None:
    fn = Tool.from_function(search).schema["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Search the index."
    assert fn["parameters"] == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "description": "How many hits at most."},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},  # Optional
        },
        "required": ["query"],
    }


def test_explicit_schema_wins_and_may_rename() -> None:
    schema = {"name": "lookup", "description": "d", "parameters": {"type": "object"}}
    tool = Tool.from_function(search, schema=schema)
    assert tool.name == "lookup"
    assert tool.schema == {"type": "function", "function": schema}


def test_loading_by_registered_name_module_and_file(tmp_path: Path) -> None:
    assert load_tool("add").fn(a=2, b=3) == 5
    assert load_tool("plugins.agents.tests.test_tools:search").name == "search"
    path = tmp_path / "calc.py"
    path.write_text("def mul(a: int, b: int) -> int:\n    '''Multiply.'''\n    return a * b\n")
    tool = load_tool(f"{path}:mul")
    assert (tool.name, tool.fn(a=6, b=7)) == ("mul", 42)
    renamed = load_tool({"fn": f"{path}:mul", "name": "times"})
    assert renamed.name == "times"


def test_loading_errors_name_the_entry(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_tool(f"{tmp_path}/nope.py:f")
    with pytest.raises(ConfigError, match="no attribute 'nope'"):
        load_tool("plugins.agents.tests.test_tools:nope")
    with pytest.raises(ConfigError, match="two tools are named 'add'"):
        load_tools(["add", {"fn": "plugins.agents.tests.test_tools:search", "name": "add"}])


def _call(tools: dict[str, Tool], name: str, args: object, timeout: float = 5.0, chars: int = 100):
    return asyncio.run(call_tool(tools, name, args, timeout_s=timeout, max_output_chars=chars))


def boom(x: int) -> int:
    """Always fails."""
    raise ValueError(f"bad x {x}")


def hang() -> str:
    """Never returns (in time)."""
    time.sleep(30)
    return "late"


async def slow_async() -> str:
    """An async tool that takes too long."""
    await asyncio.sleep(30)
    return "late"


def huge() -> str:
    """Too much output."""
    return "x" * 10_000


def junk() -> object:
    """Not text, not JSON."""
    return object()


def refuse() -> str:
    """A tool that reports a failure."""
    raise ToolError("no such file")


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def unprintable() -> str:
    """Raises an exception whose str() raises too."""
    raise _Unprintable


def deep() -> list:
    """Nested past what JSON can write."""
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    return nested


def rant() -> str:
    """A failure with a long message."""
    raise ToolError("no" * 1000)


def echo(text: str) -> str:
    """Gives back what it was sent.

    Args:
        text: What to say.
    """
    return text


async def twice(x: int) -> dict[str, int]:
    """An async tool returning JSON."""
    return {"y": 2 * x}


def test_failures_become_error_outputs() -> None:
    tools = {
        t.__name__: Tool.from_function(t) for t in (boom, hang, slow_async, huge, junk, refuse)
    }
    out = _call(tools, "boom", {"x": 3})
    assert (out.ok, out.error, out.content) == (
        False,
        "exception",
        "Error: boom raised ValueError: bad x 3",
    )
    out = _call(tools, "hang", {}, timeout=0.2)
    assert (out.ok, out.error) == (False, "timeout")
    out = _call(tools, "slow_async", {}, timeout=0.2)
    assert (out.ok, out.error) == (False, "timeout")
    out = _call(tools, "huge", {}, chars=100)
    assert (out.ok, out.error, len(out.content)) == (False, "too_long", 100 + len(" [truncated]"))
    assert _call(tools, "junk", {}).error == "bad_output"
    assert _call(tools, "refuse", {}).content == "Error: no such file"
    assert _call(tools, "nope", {}).error == "unknown_tool"
    assert _call(tools, "boom", {"y": 1}).error == "bad_arguments"
    assert _call(tools, "boom", [1]).error == "bad_arguments"


def test_odd_failures_are_answered_at_once_and_within_the_limit() -> None:
    tools = {t.__name__: Tool.from_function(t) for t in (unprintable, deep, rant, echo)}
    start = time.perf_counter()
    out = _call(tools, "unprintable", {}, timeout=20.0, chars=200)
    assert (out.error, out.content) == (
        "exception",
        "Error: unprintable raised _Unprintable: (its message could not be shown: str() of "
        "the _Unprintable raised)",
    )
    assert _call(tools, "deep", {}, timeout=20.0).error == "bad_output"
    assert time.perf_counter() - start < 10  # answered, not left to the deadline
    out = _call(tools, "rant", {}, chars=50)
    assert (out.error, out.content) == ("tool_error", "Error: " + "no" * 21 + "n [truncated]")
    # half of an emoji's escape, as a model can write it, reaches the tokenizer as U+FFFD
    assert _call(tools, "echo", {"text": "a\ud83d"}).content == "a\ufffd"


def test_async_tool_and_json_output() -> None:
    out = _call({"twice": Tool.from_function(twice)}, "twice", {"x": 4})
    assert (out.ok, out.content) == (True, '{"y": 8}')


# Shared memory: the call runs in the tool's worker process (a fork), which sees it too.
CALLS = multiprocessing.Array("q", 3)  # calls so far, and the last call's a and b


def add(a: int, b: int, mode: str | None = None) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
        mode: Unused; may be null.
    """
    with CALLS.get_lock():
        CALLS[:] = [CALLS[0] + 1, a, b]
    return a + b


def test_arguments_are_checked_against_the_schema_before_the_call() -> None:
    tools = {"add": Tool.from_function(add)}
    CALLS[:] = [0, 0, 0]
    out = _call(tools, "add", {"a": "three", "b": 1})
    # Before: the function ran and the model read "add raised TypeError: can only concatenate".
    assert (out.ok, out.error) == (False, "bad_arguments")
    assert out.content == "Error: add: argument 'a': 'three' is not of type 'integer'"
    assert _call(tools, "add", {"a": 1}).content == "Error: add: 'b' is a required property"
    assert _call(tools, "add", {"a": 1.5, "b": 1}).error == "bad_arguments"
    assert CALLS[0] == 0  # never called with bad arguments
    # transformers marks Optional parameters nullable: null is accepted for them.
    out = _call(tools, "add", {"a": 1, "b": 2, "mode": None})
    assert (out.ok, out.content, CALLS[:]) == (True, "3", [1, 1, 2])


def test_the_schema_is_transformers_own_where_it_reads_the_function() -> None:
    from transformers.utils import get_json_schema

    assert Tool.from_function(add).schema == get_json_schema(add)
    renamed = Tool.from_function(add, name="plus").schema
    assert renamed["function"]["name"] == "plus"
    assert renamed["function"]["parameters"] == get_json_schema(add)["function"]["parameters"]


def crop() -> object:
    """A 4 × 2 red picture (a PIL image, returned as it is)."""
    from PIL import Image

    return Image.new("RGB", (4, 2), (255, 0, 0))


def _png() -> bytes:
    """A 1 × 1 PNG file (the worker checks a tool's image bytes decode)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (1, 1)).save(buffer, format="PNG")
    return buffer.getvalue()


def captioned() -> ToolResult:
    """An already encoded image and a caption."""
    return ToolResult(content="a dot", images=(_png(),))


def not_an_image() -> ToolResult:
    """An image that is neither a PIL image nor bytes."""
    return ToolResult(content="?", images=([1, 2],))


def test_tools_return_images_as_encoded_bytes_beside_their_text() -> None:
    pytest.importorskip("PIL")
    from PIL import Image

    tools = {t.__name__: Tool.from_function(t) for t in (crop, captioned, not_an_image)}
    out = _call(tools, "crop", {})
    assert (out.ok, out.content, len(out.images)) == (True, "", 1)
    with Image.open(io.BytesIO(out.images[0])) as image:  # PNG, made in the tool's process
        assert (image.format, image.size, image.getpixel((0, 0))) == ("PNG", (4, 2), (255, 0, 0))
    out = _call(tools, "captioned", {})
    assert (out.ok, out.content, out.images) == (True, "a dot", (_png(),))
    assert out.record()["images"] == 1  # the rollout dump counts them, never holds the bytes
    assert "images" not in _call(tools, "crop", {"x": 1}).record()
    out = _call(tools, "not_an_image", {})
    assert (out.ok, out.error, out.images) == (False, "bad_output", ())


def test_a_turn_with_images_is_refused_by_a_request_serving_rollout() -> None:
    from hfsdk import GenerationResult, HfsdkError
    from hfsdk_agents.images import ImageRequest
    from hfsdk_agents.requests import RequestServer

    async def answer(request: object) -> GenerationResult:
        return GenerationResult(token_ids=(1,), logprobs=(0.0,), finish_reason="stop")

    server = RequestServer(answer)
    plain = ImageRequest(prompt_ids=(5, 6), max_new_tokens=2)  # no images: served as usual
    assert asyncio.run(server.generate(plain)).token_ids == (1,)
    with pytest.raises(HfsdkError, match=r"^a turn with images reached a rollout's generate_req"):
        asyncio.run(server.generate(ImageRequest(prompt_ids=(5,), max_new_tokens=2, images=[b"x"])))


def lookup(name: str) -> str:
    """Gives the name back."""
    return name


def test_a_backtracking_schema_pattern_is_checked_under_the_tool_deadline() -> None:
    """Validation ran in the rollout's event loop, outside the worker's deadline: a pattern
    that backtracks froze every trajectory for as long as it took (27 characters: ~10 s)."""
    params = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": r"^(\w+\s?)*$"}},
        "required": ["name"],
    }
    tools = {
        "lookup": Tool.from_function(lookup, schema={"description": "d", "parameters": params})
    }
    start = time.perf_counter()
    out = _call(tools, "lookup", {"name": "a" * 30 + "!"}, timeout=0.5)
    assert (out.ok, out.error) == (False, "timeout")
    assert time.perf_counter() - start < 4
    assert _call(tools, "lookup", {"name": "a b"}).content == "a b"
    out = _call(tools, "lookup", {"name": "a!"})
    assert (out.error, out.content) == (
        "bad_arguments",
        "Error: lookup: argument 'name': 'a!' does not match '^(\\\\w+\\\\s?)*$'",
    )


def repeat(word: str, n: int, limit: int | None = None) -> str:
    """Repeat a word.

    Args:
        word: The word.
        n: How many times.
        limit: At most this many; may be null.
    """
    return " ".join([word] * min(n, limit or n))


def plain(query: str, limit: int | None = None) -> str:
    """Search (a docstring transformers cannot read: ``limit`` is not described).

    Args:
        query: What to look for.
    """
    return f"{query}:{limit}"


def test_integral_floats_reach_an_int_parameter_as_ints_and_null_fits_optional() -> None:
    """jsonschema counts 3.0 and 1e1 as integers: the tool got a float and raised."""
    tools = {t.__name__: Tool.from_function(t) for t in (repeat, plain)}
    assert _call(tools, "repeat", {"word": "hi", "n": 3.0}).content == "hi hi hi"
    assert _call(tools, "repeat", {"word": "hi", "n": 1e1, "limit": 2.0}).content == "hi hi"
    assert _call(tools, "repeat", {"word": "hi", "n": 2.5}).error == "bad_arguments"
    # hfsdk's own schema (transformers could not read the docstring) keeps Optional's null
    assert Tool.from_function(plain).parameters["properties"]["limit"] == {
        "type": ["integer", "null"]
    }
    out = _call(tools, "plain", {"query": "x", "limit": None})
    assert (out.ok, out.content) == (True, "x:None")


def total(values: list) -> int:
    """Sums the values (a NumPy integer)."""
    import numpy as np

    return np.sum(np.array(values))


def mean(values: list) -> float:
    """The mean (a NumPy float32)."""
    import numpy as np

    return np.float32(np.mean(values))


def stats(values: list) -> dict:
    """A dict holding NumPy numbers and an array."""
    import numpy as np

    return {"max": np.max(values), "n": len(values), "all": np.array(values)}


def test_numpy_numbers_are_output_like_python_numbers() -> None:
    tools = {t.__name__: Tool.from_function(t) for t in (total, mean, stats)}
    assert _call(tools, "total", {"values": [1, 2, 3]}).content == "6"
    assert _call(tools, "mean", {"values": [1, 2]}).content == "1.5"
    out = _call(tools, "stats", {"values": [1, 2, 3]})
    assert (out.ok, out.content) == (True, '{"max": 3, "n": 3, "all": [1, 2, 3]}')


def _undocumented(query: str, index: str) -> str:
    return f"{query}@{index}"


class _Caller:
    def __call__(self, query: str) -> str:
        return query


PARTIAL = functools.partial(_undocumented, index="wiki")
CALLER = _Caller()


def test_partials_and_callable_objects_load_or_ask_for_a_name() -> None:
    query = {"query": {"type": "string"}}
    schema = {"description": "Echo.", "parameters": {"type": "object", "properties": query}}
    spec = "plugins.agents.tests.test_tools:PARTIAL"
    assert load_tool({"fn": spec, "name": "search"}).name == "search"
    assert (
        load_tool(
            {"fn": "plugins.agents.tests.test_tools:CALLER", "name": "echo", "schema": schema}
        ).schema["function"]["description"]
        == "Echo."
    )
    for entry in (spec, "plugins.agents.tests.test_tools:CALLER"):
        with pytest.raises(ConfigError, match=r"has no __name__.*give the entry a name:"):
            load_tool(entry)


def test_type_checking_only_hints_fall_back_to_hfsdks_own_schema(tmp_path: Path) -> None:
    path = tmp_path / "fwd.py"
    path.write_text(
        "from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from decimal import Decimal\n\n"
        "def lookup(key: str, default: Decimal | None = None) -> str:\n"
        '    """Look a key up.\n\n    Args:\n        key: the key\n'
        '        default: what to return when missing\n    """\n    return key\n'
    )
    tool = load_tool(f"{path}:lookup")
    assert tool.parameters["required"] == ["key"]


def test_an_explicit_schema_is_not_inferred_and_an_invalid_one_is_refused() -> None:
    from unittest import mock

    number = {"type": "integer"}
    schema = {
        "description": "Add.",
        "parameters": {"type": "object", "properties": {"a": number, "b": number}},
    }
    with mock.patch("hfsdk_agents.tools.schema_from_function", side_effect=AssertionError):
        load_tool({"fn": "add", "name": "add", "schema": schema})
    bad = {
        "description": "Add.",
        "parameters": {"type": "object", "properties": {"a": {"type": "int"}}},
    }
    with pytest.raises(
        ConfigError, match=r"tool 'add': its parameter schema is invalid \('int' is not valid"
    ):
        load_tool({"fn": "add", "name": "add", "schema": bad})


def test_renaming_a_registered_tool_keeps_its_registered_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hfsdk
    from hfsdk.core.registry import RegistryEntry

    def lookup(key):  # type: ignore[no-untyped-def]  # described only by its registration
        return f"value of {key}"

    schema = {
        "name": "lookup",
        "description": "Look a key up in the table.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string", "enum": ["alpha", "beta"]}},
            "required": ["key"],
        },
    }
    entry = RegistryEntry(
        name="lookup", impl=lookup, config_cls=None, plugin="test", doc="", extra={"schema": schema}
    )
    monkeypatch.setitem(hfsdk.get_registry("tools")._entries, "lookup", entry)
    renamed = load_tool({"fn": "lookup", "name": "find"})
    assert renamed.name == renamed.schema["function"]["name"] == "find"
    assert renamed.schema["function"]["description"] == "Look a key up in the table."
    assert renamed.parameters == schema["parameters"]
    # an entry's own schema still wins
    own = {"description": "Find.", "parameters": {"type": "object", "properties": {"key": {}}}}
    assert (
        load_tool({"fn": "lookup", "name": "find", "schema": own}).parameters == own["parameters"]
    )


def test_an_explicit_schema_that_does_not_bind_to_the_function_is_refused() -> None:
    def find(q: str, limit: int = 3) -> str:
        return q * limit

    def schema(**properties: object) -> dict[str, object]:
        return {"description": "Find.", "parameters": {"type": "object", "properties": properties}}

    # the schema names 'query', the function takes 'q': every call would be bad_arguments
    with pytest.raises(ConfigError, match=r"tool 'find': the schema's parameter 'query'") as info:
        load_tool({"fn": find, "schema": schema(query={"type": "string"})})
    assert "['q', 'limit']" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"tool 'find': the function's required parameter 'q'"):
        load_tool({"fn": find, "schema": schema(limit={"type": "integer"})})
    # a parameter with a default may be left out; a function with **kwargs takes any
    assert load_tool({"fn": find, "schema": schema(q={})}).name == "find"

    def anything(**kwargs: object) -> str:
        return str(kwargs)

    assert load_tool({"fn": anything, "schema": schema(query={})}).name == "anything"
