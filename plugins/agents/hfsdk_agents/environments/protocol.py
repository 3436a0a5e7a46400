"""The environment protocol: one stateful object per trajectory.

An environment is a class; the agent loop makes one instance per trajectory,
calls :meth:`Environment.reset` with the dataset row (its return value is the
first observation the model reads), lets the model call the methods named in
``tools`` (their schemas come from type hints and docstrings, as for plain
tools), stops once ``done`` is true, takes :meth:`Environment.reward` as the
trajectory's reward and calls :meth:`Environment.close`.

Subclassing :class:`Environment` is optional: any class with ``tools``,
``reset``, ``reward`` and ``close`` is accepted (:func:`environment_spec`
checks the shape once, when the environment is first named).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs

from hfsdk import ConfigError


class Environment:
    """A task with state: subclass it, name the tool methods in ``tools``.

    ``done`` (an attribute or property) ends the trajectory after the tool call that
    set it; a trajectory also ends when the model answers without a call, at
    ``rollout.multi_turn.max_turns`` or at the token budget. Tool methods may be
    ``async``; they run in the agent loop's own thread on this instance (see
    docs/agents.md, "Environments": they are the environment author's code, not the
    model's, so they do not go through the tool worker process or the sandbox).
    """

    tools: ClassVar[tuple[str, ...]] = ()
    """Names of the methods the model may call."""

    done: bool = False

    def reset(self, row: Mapping[str, Any]) -> str:
        """Start an episode for ``row`` (the prompt's dataset columns); the first observation."""
        raise NotImplementedError(
            f"{type(self).__qualname__} does not override reset(row); an environment defines "
            "reset(row), returning the first observation"
        )

    def reward(self) -> float:
        """The trajectory's reward, read once when it has ended."""
        raise NotImplementedError(
            f"{type(self).__qualname__} does not override reward(); an environment defines "
            "reward(), returning the episode's reward as a number"
        )

    def close(self) -> None:
        """Free what the episode holds (called once, also after an error)."""


_REQUIRED = ("reset", "reward", "close")

_STUBS = ("reset", "reward")
"""The members :class:`Environment` only declares: inherited, they raise NotImplementedError."""


def _missing(cls: type) -> list[str]:
    """The required members ``cls`` lacks; one still inherited from the base stubs is
    missing too (it is callable, but would fail only after a rollout)."""
    return [
        m
        for m in _REQUIRED
        if not callable(getattr(cls, m, None))
        or (m in _STUBS and getattr(cls, m) is getattr(Environment, m))
    ]


def _done_problem(cls: type) -> str | None:
    """Why ``cls``'s ``done`` cannot end an episode: a method is always truthy."""
    done = inspect.getattr_static(cls, "done", False)
    if inspect.isfunction(done) or isinstance(done, (staticmethod, classmethod)):
        return (
            "done is a method, so it is always true and every episode would end after its "
            "first tool call; make done an attribute (self.done = True) or a @property"
        )
    return None


def _unbound_view(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` (a function defined on a class) as its callers see it: without ``self``."""

    @functools.wraps(method)
    def view(*args: Any, **kwargs: Any) -> Any:  # never called: only read for its schema
        raise NotImplementedError

    signature = inspect.signature(method)
    instance, *params = signature.parameters.values()
    view.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    view.__annotations__ = {
        k: v for k, v in getattr(method, "__annotations__", {}).items() if k != instance.name
    }
    return view


@attrs.frozen(kw_only=True)
class EnvironmentSpec:
    """A checked environment class: its ``name``, the class and its tools' schemas."""

    name: str
    cls: type
    schemas: Mapping[str, Mapping[str, Any]]
    """Tool name -> OpenAI-style schema (from the method's hints and docstring)."""

    def create(self) -> Any:
        """A fresh instance for one trajectory."""
        return self.cls()


def environment_spec(name: str, cls: Any) -> EnvironmentSpec:
    """Check that ``cls`` is an environment class (else one line) and read its tool schemas."""
    from hfsdk_agents.tools import schema_from_function

    if not isinstance(cls, type):
        raise ConfigError(
            f"environment {name!r} is a {type(cls).__name__}, not a class; register or name a "
            "class with tools, reset(row), reward() and close() (docs/agents.md, Environments)"
        )
    missing = _missing(cls)
    # Only tools are awaited: an async reset(), reward() or close() would never run.
    coroutines = [m for m in _REQUIRED if inspect.iscoroutinefunction(getattr(cls, m, None))]
    if coroutines:
        raise ConfigError(
            f"environment {name!r} ({cls.__qualname__}): {', '.join(coroutines)} is async; "
            "only tool methods may be async: make reset(row), reward() and close() plain methods"
        )
    tools = getattr(cls, "tools", None)
    if missing or not isinstance(tools, (tuple, list)) or not tools:
        stubs = issubclass(cls, Environment) and all(m in _STUBS for m in missing)
        inherited = " (it only inherits Environment's stub, which raises NotImplementedError)"
        what = (
            f"it has no {', '.join(missing)}{inherited if stubs else ''}"
            if missing
            else "its tools is not a non-empty tuple"
        )
        raise ConfigError(
            f"environment {name!r} ({cls.__qualname__}): {what}; an environment class names its "
            "tool methods in tools = ('move', ...) and defines reset(row), reward() and close()"
        )
    done = _done_problem(cls)
    if done is not None:
        raise ConfigError(f"environment {name!r} ({cls.__qualname__}): {done}")
    schemas: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        method = inspect.getattr_static(cls, str(tool), None)
        if not inspect.isfunction(method):
            raise ConfigError(
                f"environment {name!r} ({cls.__qualname__}) lists tool {tool!r}, which is not a "
                "method of the class; list the names of its tool methods"
            )
        schemas[str(tool)] = schema_from_function(_unbound_view(method), str(tool))
    return EnvironmentSpec(name=name, cls=cls, schemas=schemas)
