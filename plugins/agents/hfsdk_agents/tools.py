"""Tools: plain Python functions the model can call, with an OpenAI-style schema.

A :class:`Tool` wraps a sync or ``async`` function. Its schema comes from the
function's type hints and docstring (:func:`schema_from_function`) unless one is
given. :func:`load_tool` finds a tool by registered name (``hfsdk_register_tools``),
``module:fn`` or ``path/to/file.py:fn``. :func:`call_tool` runs one call in a worker
process with a deadline (:mod:`hfsdk_agents.tool_worker`) and turns every
failure (an exception, a timeout, a dead worker, an unknown tool, bad arguments,
output that is not text-like, output over the size limit) into an error message
the model reads as the tool's output: a tool never ends the run.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import re
import time
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from hfsdk import ConfigError, HfsdkError
from hfsdk_agents.argument_checks import parameters_json, schema_validator
from hfsdk_agents.file_modules import import_file
from hfsdk_agents.tool_worker import ToolError as ToolError  # public here
from hfsdk_agents.tool_worker import ToolResult as ToolResult  # public here
from hfsdk_agents.tool_worker import ToolWorkers

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    tuple: "array",
    dict: "object",
}


def _json_type(hint: Any) -> dict[str, Any]:
    """The JSON-schema type of a type hint (unions take their first non-None type; ``None`` in
    one, as in ``Optional``, adds ``"null"``, so the model may send null as Python allows)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        out = _json_type(args[0]) if args else {}
        if len(args) < len(typing.get_args(hint)) and "type" in out:
            kinds = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [*kinds, "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        return out
    if origin is typing.Literal:
        values = list(typing.get_args(hint))
        return {**_json_type(type(values[0])), "enum": values}
    if origin in (list, tuple):
        args = typing.get_args(hint)
        item = _json_type(args[0]) if args else {}
        return {"type": "array", **({"items": item} if item else {})}
    base = origin or hint
    return {"type": _JSON_TYPES[base]} if base in _JSON_TYPES else {}


_PARAM_LINE = re.compile(r"^\s*[*]{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


_SECTIONS = ("args:", "arguments:", "parameters:", "returns:", "raises:", "yields:", "example:")


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google-style docstring."""
    description: list[str] = []
    params: dict[str, str] = {}
    section = ""
    current = None
    for line in inspect.cleandoc(doc).splitlines() if doc else []:
        stripped = line.strip()
        if stripped.lower() in _SECTIONS and not line.startswith((" ", "\t")):
            section = stripped.lower()
            continue
        if not section:
            description.append(stripped)
        elif section in _SECTIONS[:3]:
            match = _PARAM_LINE.match(line)
            if match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and stripped:
                params[current] += " " + stripped
    return " ".join(" ".join(description).split()), params


def schema_from_function(fn: Callable[..., Any], name: str | None = None) -> dict[str, Any]:
    """An OpenAI-style function schema from ``fn``'s signature, type hints and docstring.

    ``transformers.utils.get_json_schema`` writes it when it accepts ``fn`` (a
    docstring describing every parameter), so a tool reads the same to the model
    as under TRL and transformers' chat templates; else hfsdk's own reading:
    parameters without a default are required, the docstring's first part is the
    description and its ``Args:`` section describes the parameters.
    """
    from transformers.utils import get_json_schema
    from transformers.utils.chat_template_utils import (
        DocstringParsingException,
        TypeHintParsingException,
    )

    try:
        schema = get_json_schema(fn)
    except (
        DocstringParsingException,
        TypeHintParsingException,
        TypeError,
        ValueError,
        NameError,  # a hint imported under TYPE_CHECKING only
        AttributeError,  # a partial or a callable object: no __name__
    ):
        return _own_schema(fn, name)
    schema["function"]["name"] = name or schema["function"]["name"]
    return schema


def _own_schema(fn: Callable[..., Any], name: str | None) -> dict[str, Any]:
    """hfsdk's schema of a function transformers cannot read (no or a partial docstring)."""
    # A partial's or a callable object's own docstring and hints are its class's, not the tool's.
    if isinstance(fn, functools.partial):
        target: Any = fn.func
    elif inspect.isroutine(fn) or isinstance(fn, type):
        target = fn
    else:  # a callable object: its __call__ method is the function
        target = type(fn).__call__
    description, described = _docstring_parts(inspect.getdoc(target) or "")
    try:
        hints = typing.get_type_hints(target)
    except (NameError, TypeError, AttributeError):
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        prop = _json_type(hints.get(param.name, Any))
        if param.name in described:
            prop["description"] = described[param.name]
        properties[param.name] = prop
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    return {
        "type": "function",
        "function": {
            "name": name or _function_name(fn),
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


@attrs.frozen(kw_only=True)
class Tool:
    """A function the model may call: ``name``, its callable and its OpenAI-style ``schema``."""

    name: str
    fn: Callable[..., Any]
    schema: Mapping[str, Any]

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> Tool:
        """A tool of ``fn``; the schema from its hints and docstring unless ``schema`` is given.

        An explicit ``schema`` may be the whole ``{"type": "function", "function": {...}}``
        or just its ``function`` part.
        """
        if isinstance(fn, Tool):
            return fn
        if not callable(fn):
            raise HfsdkError(f"tool {name or fn!r} is a {type(fn).__name__}, not a function")
        explicit = schema is not None
        if schema is not None:
            schema = dict(schema)
            if "function" not in schema:
                schema = {"type": "function", "function": schema}
            tool_name = name or schema["function"].get("name") or _function_name(fn)
            function = {**schema["function"], "name": tool_name}
            schema = {"type": "function", "function": function}
        else:
            tool_name = name or _function_name(fn)
            schema = schema_from_function(fn, tool_name)
        tool = cls(name=tool_name, fn=fn, schema=schema)
        invalid = schema_validator(parameters_json(tool.parameters))[1]
        if invalid is not None:  # else every call would be a bad_arguments blamed on the model
            raise ConfigError(
                f"tool {tool_name!r}: its parameter schema is invalid ({invalid}); fix the "
                "tool's schema (parameters: a JSON Schema object; types are string, integer, "
                "number, boolean, array, object, null)"
            )
        if explicit:
            _check_binding(tool_name, fn, tool.parameters)
        return tool

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments."""
        return self.schema["function"].get("parameters", {})


def _check_binding(name: str, fn: Callable[..., Any], parameters: Mapping[str, Any]) -> None:
    """A ``ConfigError`` when an explicit schema's properties do not bind to ``fn``'s
    signature: every call that follows the schema would then be a bad_arguments blamed on
    the model. A function that takes ``**kwargs`` (or has no signature to read) takes any;
    a schema without ``properties`` names no arguments to check."""
    if not isinstance(parameters.get("properties"), Mapping):
        return
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    accepted = [p.name for p in params if p.kind in kinds]
    properties = list(parameters["properties"])
    for prop in properties:
        if prop not in accepted:
            raise ConfigError(
                f"tool {name!r}: the schema's parameter {prop!r} is not a parameter of the "
                f"function (it takes {accepted}), so every call that gives it would fail; "
                "name the schema's properties after the function's parameters"
            )
    for p in params:
        if p.kind in kinds and p.default is inspect.Parameter.empty and p.name not in properties:
            raise ConfigError(
                f"tool {name!r}: the function's required parameter {p.name!r} is not among "
                f"the schema's properties {properties}, so no call could give it; add it to "
                "the schema or give the parameter a default"
            )


def _function_name(fn: Callable[..., Any], entry: Any = None) -> str:
    """``fn.__name__``; a ``ConfigError`` naming ``entry`` (or ``fn``) when it has none."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        what = entry if entry is not None else fn
        raise ConfigError(
            f"tool {what!r} is a {type(fn).__name__}, which has no __name__ to call the tool "
            "by; give the entry a name: {fn: ..., name: my_tool} (and schema: ... unless its "
            "docstring and hints describe it)"
        )
    return name


def _load_callable(spec: str, what: str = "tool") -> Callable[..., Any]:
    """The function named by ``module:fn`` or ``path/to/file.py:fn`` (``what`` names the setting
    in errors)."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ConfigError(
            f"{what} {spec!r}: expected a registered tool name, 'module:function' or "
            "'path/to/file.py:function' (hfsdk list tools)"
        )
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise ConfigError(f"{what} {spec!r}: the file {str(path)!r} does not exist")
        try:
            module = import_file(path, "hfsdk_tools_")
        except Exception as err:
            raise ConfigError(f"{what} {spec!r}: {_import_failure(err)}") from None
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise ConfigError(f"{what} {spec!r}: cannot import {target!r} ({err})") from None
        except Exception as err:
            raise ConfigError(f"{what} {spec!r}: {_import_failure(err)}") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise ConfigError(f"{what} {spec!r}: {target!r} has no attribute {attr!r}")
    return fn  # type: ignore[no-any-return]


def _import_failure(err: Exception) -> str:
    """One line on why a tool's module could not be imported, and what to do."""
    if isinstance(err, SyntaxError):
        where = f"{Path(err.filename or '?').name}, line {err.lineno}"
        return f"the file has a syntax error ({where}: {err.msg}); fix it and run again"
    first = (str(err).strip().splitlines() or [""])[0]
    return f"importing it raised {type(err).__name__}: {first}; fix the module and run again"


def load_tool(spec: str | Mapping[str, Any] | Callable[..., Any] | Tool) -> Tool:
    """A tool from a config entry.

    ``spec`` is a registered name (``hfsdk list tools``), ``module:fn``,
    ``file.py:fn``, a function, a mapping ``{"fn": <one of those>, "name": ...,
    "schema": {...}}`` (an explicit schema), or a verl tool class
    ``{"verl_class": "module:Class", "schema": {...}, "config": {...}}`` (what
    ``hfsdk config import verl`` writes from verl's tool config).
    """
    if isinstance(spec, Tool):
        return spec
    if callable(spec):
        return Tool.from_function(spec)
    if isinstance(spec, Mapping) and "verl_class" in spec:
        from hfsdk_agents.verl_adapter import verl_tool_function

        unknown = set(spec) - {"verl_class", "name", "schema", "config"}
        if unknown or not spec.get("schema"):
            raise ConfigError(
                f"tool entry {dict(spec)!r}: a verl tool takes verl_class, schema (required), "
                f"name, config; got {sorted(spec)}"
            )
        cls = _load_callable(str(spec["verl_class"]))
        name = spec.get("name")
        fn = verl_tool_function(cls, schema=spec["schema"], config=spec.get("config"), name=name)
        return Tool.from_function(fn, name=name, schema=spec["schema"])
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"fn", "name", "schema"}
        if unknown or "fn" not in spec:
            raise ConfigError(
                f"tool entry {dict(spec)!r}: expected keys fn (required), name, schema "
                f"(or verl_class, schema, config); got {sorted(spec)}"
            )
        # The function only: inferring a schema of its own would be wasted (an explicit schema
        # wins) and fails for functions only an explicit schema can describe.
        fn = _callable_of(spec["fn"])
        schema = spec.get("schema")
        if schema is None:  # a registered tool keeps the schema it was registered with
            schema = _registered_schema(spec["fn"])
        if spec.get("name") is None and schema is None:
            _function_name(fn, spec["fn"])
        return Tool.from_function(fn, name=spec.get("name"), schema=schema)
    if not isinstance(spec, str):
        raise ConfigError(
            f"rollout.multi_turn.tools: the entry {spec!r} ({type(spec).__name__}) is not a "
            "tool; give a registered tool name (hfsdk list tools), 'module:function', "
            "'path/to/file.py:function' or a mapping {fn: ..., name: ...}"
        )
    if ":" not in spec:
        import hfsdk  # the registry through the public surface (no import cycle)

        entry = hfsdk.get_registry("tools")[spec]
        impl = entry.impl
        if isinstance(impl, Tool):
            return impl
        schema = entry.extra.get("schema")
        return Tool.from_function(impl, name=spec, schema=schema)
    fn = _load_callable(spec)
    return Tool.from_function(fn, name=_function_name(fn, spec))


def _registered_schema(spec: Any) -> Mapping[str, Any] | None:
    """The schema a mapping entry's ``fn`` already has: a ``Tool``'s, or a registered tool's
    (given at registration); ``None`` for a function, which is described by its hints."""
    if isinstance(spec, Tool):
        return spec.schema
    if isinstance(spec, str) and ":" not in spec:
        import hfsdk  # the registry through the public surface (no import cycle)

        entry = hfsdk.get_registry("tools")[spec]
        if isinstance(entry.impl, Tool):
            return entry.impl.schema
        return entry.extra.get("schema")  # type: ignore[no-any-return]
    return None


def _callable_of(spec: Any) -> Callable[..., Any]:
    """The function of a mapping entry's ``fn`` (a name, ``module:fn``, a callable), without
    building its schema."""
    if isinstance(spec, Tool):
        return spec.fn
    if isinstance(spec, str) and ":" in spec:
        return _load_callable(spec)
    if isinstance(spec, str):
        import hfsdk  # the registry through the public surface (no import cycle)

        impl = hfsdk.get_registry("tools")[spec].impl
        return impl.fn if isinstance(impl, Tool) else impl  # type: ignore[no-any-return]
    if callable(spec) and not isinstance(spec, Mapping):
        return spec  # type: ignore[no-any-return]
    return load_tool(spec).fn


def load_tools(specs: typing.Sequence[Any]) -> dict[str, Tool]:
    """Tools by name; two tools of one name is an error naming both entries."""
    tools: dict[str, Tool] = {}
    for spec in specs:
        tool = load_tool(spec)
        if tool.name in tools:
            raise ConfigError(
                f"rollout.multi_turn.tools: two tools are named {tool.name!r}; rename one "
                "(a mapping entry with name: ...)"
            )
        tools[tool.name] = tool
    return tools


def encodable_text(text: str) -> str:
    """``text`` as a tokenizer takes it: a lone surrogate (half of an emoji's ``\\ud83d``
    escape, which a model can write and a tool echo back) becomes U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def cut_text(text: str, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters and marked, or ``None`` when it fits."""
    return text[:limit] + " [truncated]" if len(text) > limit else None


@attrs.frozen(kw_only=True)
class ToolOutput:
    """What one tool call gave the model: ``content`` (text), ``ok`` and the error kind.

    ``error``: ``None``, ``unknown_tool``, ``bad_arguments``, ``exception``, ``tool_error``
    (a :class:`ToolError`), ``timeout``, ``crashed`` (the tool's worker process died),
    ``stopped`` (cut short: the run is stopping), ``episode_ended`` (not run: an environment
    was done before it),
    ``bad_output`` (not text, numbers or JSON-serialisable) or ``too_long``
    (cut to the limit). ``seconds`` is the call's wall time. ``images``: the encoded images
    a tool returned (:class:`ToolResult`), shown to the model before ``content``.
    """

    name: str
    content: str = attrs.field(converter=encodable_text)
    ok: bool
    error: str | None = None
    seconds: float = 0.0
    images: tuple[bytes, ...] = ()

    def record(self) -> dict[str, Any]:
        """A JSON-ready record of the call (images as their count)."""
        record = attrs.asdict(self, filter=lambda field, _: field.name != "images")
        return {**record, "images": len(self.images)} if self.images else record


async def call_tool(
    tools: Mapping[str, Tool],
    name: str,
    arguments: Any,
    *,
    timeout_s: float,
    max_output_chars: int,
    runner: ToolWorkers | None = None,
) -> ToolOutput:
    """Run one tool call; every failure becomes an error message as the tool's output.

    The call runs in ``runner``'s worker process (one made for this call when
    ``None``), which is killed when the call passes ``timeout_s``
    (:mod:`hfsdk_agents.tool_worker`): a tool that blocks or loops forever is
    a ``timeout`` error and the rollout goes on.
    """
    started = time.perf_counter()

    def fail(kind: str, message: str) -> ToolOutput:
        text = f"Error: {message}"
        return ToolOutput(
            name=name,
            content=cut_text(text, max_output_chars) or text,  # the limit holds for errors too
            ok=False,
            error=kind,
            seconds=time.perf_counter() - started,
        )

    tool = tools.get(name)
    if tool is None:
        return fail("unknown_tool", f"unknown tool {name!r}; available: {sorted(tools)}")
    if not isinstance(arguments, Mapping):
        return fail("bad_arguments", f"arguments of {name!r} must be a JSON object")
    # The worker checks the arguments (a bad_arguments outcome), under the deadline: here a
    # backtracking schema pattern would stall every trajectory's event loop.
    schema_json = parameters_json(tool.parameters)
    if runner is None:
        runner = ToolWorkers({name: tool.fn})
        try:
            kind, output = await runner.run(name, arguments, timeout_s, schema_json=schema_json)
        finally:
            runner.close()
    else:
        kind, output = await runner.run(name, arguments, timeout_s, schema_json=schema_json)
    if kind != "ok":
        return fail(kind, str(output))
    text, images = (output, ()) if isinstance(output, str) else (output.content, output.images)
    cut = cut_text(text, max_output_chars)
    if cut is not None:
        return ToolOutput(
            name=name,
            content=cut,
            ok=False,
            error="too_long",
            seconds=time.perf_counter() - started,
            images=images,
        )
    seconds = time.perf_counter() - started
    return ToolOutput(name=name, content=text, ok=True, seconds=seconds, images=images)
