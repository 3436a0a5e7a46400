"""Which agent program a run uses, and running one under its deadline.

``rollout.multi_turn.agent`` is a name registered with ``hfsdk_register_agents``,
``module:fn`` or ``path/to/file.py:fn``. An agent is ``agent(base_url, row)``
returning a reward or ``None``; a sync one runs in a daemon thread, an ``async``
one in an event loop of its own in a daemon thread, so an agent that blocks
cannot stall the rollout's loop, and one that hangs is left behind at its
deadline (its session closes, so it can no longer reach the model).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import importlib.util
import inspect
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from hfsdk import ConfigError
from hfsdk_agents.file_modules import import_file

Agent = Callable[[str, dict[str, Any]], Any]
"""``agent(base_url, row) -> float | None`` (or a coroutine function of the same)."""


def registered_agents() -> dict[str, Agent]:
    """Every agent registered through ``hfsdk_register_agents`` (the ``agents`` registry
    kind; a name two plugins register is an error naming both)."""
    from hfsdk import get_registry

    return {name: entry.impl for name, entry in get_registry("agents").items()}


def _from_file(path: Path, spec: str) -> Any:
    if not path.is_file():
        raise ConfigError(
            f"rollout.multi_turn.agent={spec!r}: the file {str(path)!r} does not exist"
        )
    try:
        return import_file(path, "hfsdk_agent_")
    except Exception as err:
        raise ConfigError(
            f"rollout.multi_turn.agent={spec!r}: importing the file raised "
            f"{type(err).__name__}: {err}; fix it and run again"
        ) from None


def load_agent(spec: str) -> Agent:
    """The agent ``spec`` names (see the module docstring); a bad spec is one line."""
    agents = registered_agents()
    if spec in agents:
        return agents[spec]
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        known = ", ".join(sorted(agents)) or "none"
        raise ConfigError(
            f"rollout.multi_turn.agent={spec!r} is not a registered agent (registered: {known}), "
            "'module:function' or 'path/to/file.py:function'"
        )
    if target.endswith(".py"):
        module = _from_file(Path(target).expanduser(), spec)
    else:
        try:
            module = importlib.import_module(target)
        except Exception as err:
            raise ConfigError(
                f"rollout.multi_turn.agent={spec!r}: cannot import {target!r} "
                f"({type(err).__name__}: {err})"
            ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"rollout.multi_turn.agent={spec!r}: {target!r} has no function {attr!r}")
    return fn  # type: ignore[no-any-return]


class AgentExit(Exception):
    """How an agent ended that is not an exception of its own: ``sys.exit(N)`` with N not 0,
    or a ``BaseException`` such as ``KeyboardInterrupt`` raised in its thread."""


@attrs.frozen(kw_only=True)
class AgentOutcome:
    """How an agent ended: its returned value, or the error / deadline that stopped it."""

    value: Any = None
    error: str | None = None
    timed_out: bool = False


def _call(agent: Agent, base_url: str, row: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(agent):
        return asyncio.run(agent(base_url, row))
    value = agent(base_url, row)
    if inspect.isawaitable(value):
        return asyncio.run(_await(value))
    return value


async def _await(value: Any) -> Any:
    return await value


async def run_agent(
    agent: Agent, base_url: str, row: Mapping[str, Any], *, deadline_s: float
) -> AgentOutcome:
    """Run ``agent`` in a daemon thread and wait for it at most ``deadline_s`` seconds."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            value = _call(agent, base_url, dict(row))
        except SystemExit as err:  # a script's sys.exit() ends the agent, never the run
            if err.code in (None, 0):
                future.set_result(None)
            else:
                future.set_exception(AgentExit(f"exited with status {err.code!r}"))
        except Exception as err:  # reported, never raised in the rollout
            future.set_exception(err)
        except BaseException as err:
            future.set_exception(AgentExit(f"raised {type(err).__name__}"))
        else:
            future.set_result(value)

    threading.Thread(target=target, name="hfsdk-agent", daemon=True).start()
    try:
        value = await asyncio.wait_for(asyncio.wrap_future(future), timeout=deadline_s)
    except TimeoutError:
        return AgentOutcome(error=f"hung: no answer within {deadline_s:g} s", timed_out=True)
    except AgentExit as err:
        return AgentOutcome(error=str(err))
    except Exception as err:  # the agent's own exception
        first = (str(err).strip().splitlines() or [""])[0]
        return AgentOutcome(error=f"raised {type(err).__name__}: {first}"[:300])
    return AgentOutcome(value=value)
