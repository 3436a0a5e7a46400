"""Run a verl tool class (``verl.tools.base_tool.BaseTool`` style) as an hfsdk tool.

A verl tool is a class built with ``(config, tool_schema)`` whose coroutines
``create(instance_id)``, ``execute(instance_id, parameters)`` and
``release(instance_id)`` serve one trajectory's calls. :func:`verl_tool` wraps such
a class unchanged: one instance per tool, and per call ``create`` → ``execute`` →
``release``; ``execute``'s first result (text, or an object with ``text``) is what
the model reads. ``hfsdk config import verl`` writes these entries from verl's
``tool_config_path`` file.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from hfsdk import ConfigError


def _schema_object(schema: Mapping[str, Any]) -> Any:
    """verl's pydantic schema when verl is installed, else the plain mapping."""
    try:
        from verl.tools.schemas import OpenAIFunctionToolSchema  # type: ignore[import-not-found]
    except ImportError:
        return dict(schema)
    return OpenAIFunctionToolSchema.model_validate(dict(schema))


def _text(result: Any) -> Any:
    value = result[0] if isinstance(result, tuple) else result
    text = getattr(value, "text", None)
    return text if isinstance(text, str) else value


def verl_tool_function(
    cls: type, *, schema: Mapping[str, Any], config: Mapping[str, Any] | None, name: str | None
) -> Callable[..., Awaitable[Any]]:
    """An async function that calls an instance of the verl tool class ``cls`` (built once)."""
    for method in ("execute",):
        if not inspect.iscoroutinefunction(getattr(cls, method, None)):
            raise ConfigError(
                f"verl tool {cls.__qualname__}: no async {method}(instance_id, parameters); "
                "give a verl BaseTool subclass, or a plain function as fn"
            )
    instance = cls(config=dict(config or {}), tool_schema=_schema_object(schema))

    async def call(**arguments: Any) -> Any:
        created = None
        if inspect.iscoroutinefunction(getattr(instance, "create", None)):
            created = await instance.create(str(uuid.uuid4()))
        instance_id = created[0] if isinstance(created, tuple) else created
        try:
            return _text(await instance.execute(instance_id, dict(arguments)))
        finally:
            if inspect.iscoroutinefunction(getattr(instance, "release", None)):
                await instance.release(instance_id)

    call.__name__ = name or cls.__name__
    call.__doc__ = cls.__doc__
    return call
