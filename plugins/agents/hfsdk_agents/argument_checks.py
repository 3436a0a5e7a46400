"""A tool call's arguments checked against the tool's JSON schema and signature.

Apart from :mod:`hfsdk_agents.tools` so that the tool worker (:mod:`hfsdk_agents.tool_worker`),
which runs the check under the call's deadline, imports it without importing the tools
module that imports the worker.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any


def _nullable(schema: Any) -> Any:
    """``schema`` with OpenAPI's ``nullable: true`` (transformers' Optional) as a null type."""
    if isinstance(schema, list):
        return [_nullable(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {key: _nullable(value) for key, value in schema.items() if key != "nullable"}
    if schema.get("nullable") and "type" in out:
        kinds = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*kinds, "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


@functools.lru_cache(maxsize=256)
def schema_validator(schema_json: str) -> tuple[Any, str | None]:
    """(a validator of the schema, why the schema itself is invalid or ``None``), made once per
    schema: checking a schema against its meta-schema costs more than the call it guards."""
    import jsonschema

    schema = _nullable(json.loads(schema_json))
    validator_cls = jsonschema.validators.validator_for(schema)
    try:
        validator_cls.check_schema(schema)
    except jsonschema.SchemaError as err:
        return None, err.message
    return validator_cls(schema), None


def parameters_json(parameters: Mapping[str, Any]) -> str:
    """The parameter schema as the JSON that keys the validator cache (and crosses to the
    tool worker)."""
    return json.dumps(parameters, sort_keys=True, default=dict)


def _integer_typed(schema: Any) -> bool:
    """Whether a property's schema takes integers but not other numbers."""
    kinds = schema.get("type") if isinstance(schema, Mapping) else None
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return "integer" in kinds and "number" not in kinds


def checked_arguments(
    schema_json: str, fn: Callable[..., Any], arguments: Mapping[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """``(arguments as the function gets them, why they do not fit or None)``: the JSON schema
    (``schema_json``), then ``fn``'s signature.

    jsonschema counts ``3.0`` and ``1e1`` as integers, so an integral float given for an
    ``integer`` parameter becomes an ``int`` (the Python type the schema stands for). The
    schema is what the model was shown, so its words are what the model reads back:
    ``argument 'a': 'three' is not of type 'integer'``. The tool worker calls this under the
    call's deadline: a schema ``pattern`` can backtrack for minutes.
    """
    import jsonschema

    validator, invalid = schema_validator(schema_json)
    if invalid is not None:
        return dict(arguments), f"the tool's own parameter schema is invalid ({invalid})"
    error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path)
        return dict(arguments), f"argument {where!r}: {error.message}" if where else error.message
    schema = validator.schema
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    properties = properties if isinstance(properties, Mapping) else {}
    arguments = {
        key: int(value)
        if isinstance(value, float) and value.is_integer() and _integer_typed(properties.get(key))
        else value
        for key, value in arguments.items()
    }
    try:
        inspect.signature(fn).bind(**arguments)
    except (TypeError, ValueError) as err:
        return arguments, str(err)
    return arguments, None
