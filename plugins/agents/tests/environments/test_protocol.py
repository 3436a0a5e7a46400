"""The environment protocol: schemas from methods, loading by name, one-line refusals."""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

import hfsdk
from hfsdk import HfsdkError
from hfsdk.core.config import resolve_run_config
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager
from hfsdk_agents.checks import prompt_tool_schemas
from hfsdk_agents.environments import Environment, environment_spec
from hfsdk_agents.environments.calls import bound_tools, call_environment_tool
from hfsdk_agents.environments.checks import environment_reward_problems, environment_rows_check
from hfsdk_agents.environments.frozen_lake import FrozenLake
from hfsdk_agents.environments.registry import load_environment
from hfsdk_agents.tools import ToolError

from . import counter_env


def test_tool_schemas_come_from_the_methods_without_self() -> None:
    spec = environment_spec("frozen_lake", FrozenLake)
    function = spec.schemas["move"]["function"]
    assert function["name"] == "move"
    assert function["description"] == "Move one cell on the frozen lake."
    assert function["parameters"]["required"] == ["direction"]
    direction = function["parameters"]["properties"]["direction"]
    assert direction["enum"] == ["left", "down", "right", "up"]


class NoTools:
    def reset(self, row): ...
    def reward(self): ...
    def close(self): ...


class ListsAnAttribute(NoTools):
    tools: ClassVar[tuple[str, ...]] = ("speed",)
    speed = 3


class Unrewarded(Environment):
    """Subclasses Environment but keeps its reward() stub (it would fail after a rollout)."""

    tools: ClassVar[tuple[str, ...]] = ("bump",)

    def reset(self, row):  # type: ignore[no-untyped-def]
        return ""

    def bump(self) -> str:
        """Bump."""
        return ""


class DoneMethod(counter_env.Counter):
    """``done`` written as a plain method: always truthy, so every episode would end at once."""

    def done(self) -> bool:  # type: ignore[override]
        return self.count >= self.target


class AsyncReset(counter_env.Counter):
    """A valid environment but for its reset, which would be called and never awaited (the
    episode ran on a coroutine's repr)."""

    async def reset(self, row): ...  # type: ignore[no-untyped-def, override]


@pytest.mark.parametrize(
    ("cls", "says"),
    [
        (NoTools, "tools is not a non-empty tuple"),
        (ListsAnAttribute, "lists tool 'speed', which is not a method of the class"),
        (FrozenLake(), "is a FrozenLake, not a class"),
        (type("Bare", (), {"tools": ("x",)}), "it has no reset, reward, close"),
        (AsyncReset, "reset is async; only tool methods may be async"),
        (Unrewarded, "it has no reward (it only inherits Environment's stub, which raises"),
        (DoneMethod, "done is a method, so it is always true"),
    ],
)
def test_a_class_that_is_no_environment_is_one_line(cls: object, says: str) -> None:
    with pytest.raises(HfsdkError) as info:
        environment_spec("bad", cls)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_base_class_stubs_say_what_to_override() -> None:
    with pytest.raises(NotImplementedError, match=r"Unrewarded does not override reward\(\)"):
        Unrewarded().reward()
    with pytest.raises(NotImplementedError, match=r"Environment does not override reset\(row\)"):
        Environment().reset({})


def test_module_and_file_specs_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_env_module_xyz.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_environment(f"{counter_env.__name__}:Counter").cls is counter_env.Counter
    path = tmp_path / "my_env.py"
    path.write_text(
        "from hfsdk_agents.environments.frozen_lake import FrozenLake\n"
        "class Lake(FrozenLake):\n    pass\n"
    )
    assert load_environment(f"{path}:Lake").cls.__name__ == "Lake"
    for spec, says in [
        (f"{tmp_path}/nope.py:Lake", "does not exist"),
        (f"{path}:Pond", "has no attribute 'Pond'"),
        ("no_such_module_xyz:Lake", "cannot import 'no_such_module_xyz'"),
        # A module whose own code fails (not an ImportError): was a plugin's or an internal error.
        ("broken_env_module_xyz:Lake", "importing it raised RuntimeError: boom"),
    ]:
        with pytest.raises(HfsdkError) as info:
            load_environment(spec)
        assert says in str(info.value) and "\n" not in str(info.value)


@pytest.fixture
def second_lake() -> Iterator[None]:
    module = types.ModuleType("second_lake_plugin")

    @hfsdk.hookimpl
    def hfsdk_register_environments(register):  # type: ignore[no-untyped-def]
        register("frozen_lake", counter_env.Counter)

    module.hfsdk_register_environments = hfsdk_register_environments  # type: ignore[attr-defined]
    reset_plugin_manager()
    get_plugin_manager().pm.register(module, name="second_lake")
    yield
    reset_plugin_manager()


def test_two_plugins_registering_one_name_is_an_error_naming_both(second_lake: None) -> None:
    with pytest.raises(HfsdkError) as info:
        load_environment("frozen_lake")
    message = str(info.value)
    assert "'agents'" in message and "'second_lake'" in message


def test_the_prompts_announce_one_environments_tools_not_a_columns() -> None:
    one = resolve_run_config("grpo", {"rollout": {"multi_turn": {"environment": "frozen_lake"}}})
    assert [s["function"]["name"] for s in prompt_tool_schemas(one)] == ["move"]
    column = resolve_run_config("grpo", {"rollout": {"multi_turn": {"environment_column": "e"}}})
    assert prompt_tool_schemas(column) == []


class Slow(Environment):
    tools: ClassVar[tuple[str, ...]] = (
        "wait", "refuse", "quit", "rant", "echo", "pick", "fetch",
    )  # fmt: skip

    def reset(self, row):  # type: ignore[no-untyped-def]
        return ""

    async def wait(self, seconds: float) -> str:
        """Sleep.

        Args:
            seconds: How long.
        """
        await asyncio.sleep(seconds)
        return "woke"

    def refuse(self) -> str:
        """Say no."""
        raise ToolError("not now")

    def quit(self) -> str:
        """Exit as a script would."""
        sys.exit("bye")

    def rant(self) -> str:
        """Fail with a long message."""
        raise ToolError("no" * 1000)

    def echo(self, text: str) -> list:
        """Give back what it was sent, as text or nested too deep for JSON.

        Args:
            text: What to say.
        """
        if text != "deep":
            return text  # type: ignore[return-value]
        nested: list = []
        for _ in range(100_000):
            nested = [nested]
        return nested

    def pick(self, slot: int) -> str:
        """Take the item in a slot.

        Args:
            slot: Which slot.
        """
        return ["apple", "pear", "plum"][slot]

    def fetch(self, url: str) -> str:
        """Fetch a page whose server times out (the tool's own TimeoutError, not the deadline).

        Args:
            url: The page.
        """
        raise TimeoutError("upstream server timed out after 0.1 s")

    def reward(self) -> float:
        return 0.0


def _call(name: str, arguments: object, chars: int = 100) -> tuple[bool, str | None, str]:
    tools = bound_tools(environment_spec("slow", Slow).schemas, Slow())
    out = asyncio.run(
        call_environment_tool(tools, name, arguments, timeout_s=0.2, max_output_chars=chars)
    )
    return out.ok, out.error, out.content


def test_tool_failures_are_the_tools_output() -> None:
    assert _call("wait", {"seconds": 5}) == (
        False,
        "timeout",
        "Error: wait did not return within 0.2 s",
    )
    assert _call("refuse", {}) == (False, "tool_error", "Error: not now")
    ok, error, content = _call("wait", {"seconds": "soon"})
    assert (ok, error) == (False, "bad_arguments") and "'soon' is not of type 'number'" in content
    assert _call("wait", {"seconds": 0}, chars=3) == (False, "too_long", "wok [truncated]")
    assert _call("wait", [1])[1] == "bad_arguments"
    # sys.exit() in a tool ends the call, not the run; an error output keeps the limit too
    assert _call("quit", {}) == (False, "exception", "Error: quit raised SystemExit: bye")
    # a TimeoutError the tool raised itself is its exception, not the call's deadline
    assert _call("fetch", {"url": "x"}) == (
        False,
        "exception",
        "Error: fetch raised TimeoutError: upstream server timed out after 0.1 s",
    )
    assert _call("rant", {}) == (False, "tool_error", "Error: " + "no" * 46 + "n [truncated]")
    assert _call("echo", {"text": "deep"})[:2] == (False, "bad_output")
    # half of an emoji's escape, echoed back, reaches the tokenizer as U+FFFD
    assert _call("echo", {"text": "a\ud83d"}) == (True, None, "a\ufffd")


def test_an_integral_float_reaches_an_integer_parameter_as_an_int() -> None:
    # jsonschema counts 1.0 as an integer; the method gets 1, as a plain tool does
    assert _call("pick", {"slot": 1.0}) == (True, None, "pear")


def test_settings_that_cannot_run_are_refused_in_one_line() -> None:
    both = {"environment": "frozen_lake", "environment_column": "e", "tools": ["add"]}
    with pytest.raises(HfsdkError) as info:
        resolve_run_config("grpo", {"rollout": {"multi_turn": both}})
    message = str(info.value)
    assert "\n" not in message
    assert (
        "rollout.multi_turn.environment and environment_column are both set; give one "
        "environment for all rows or a column naming each row's" in message
    )
    assert (
        "rollout.multi_turn.tools=['add'] with an environment: the model calls the "
        "environment's own tools; drop rollout.multi_turn.tools" in message
    )


@pytest.mark.parametrize(
    "rollout", [{}, {"multi_turn": {"tools": ["add"]}}], ids=["single_turn", "tool_loop"]
)
def test_the_environment_reward_without_an_environment_is_refused_before_the_run(
    rollout: dict,
) -> None:
    # It failed only at the first scoring, after the models had loaded and a rollout ran.
    reward = {"functions": [{"name": "environment"}]}
    says = (
        "reward.functions lists 'environment', which reads each trajectory's environment "
        "reward, but no environment runs (rollout.multi_turn.environment and "
        "environment_column are unset); set one of them or drop the 'environment' reward"
    )
    with pytest.raises(HfsdkError) as info:  # the reward section: refused as the config loads
        resolve_run_config("grpo", {"rollout": rollout, "reward": reward})
    assert str(info.value) == says
    # Another signal's functions (a plugin's cost section): refused by the preflight check.
    config = resolve_run_config("grpo", {"rollout": rollout})
    cost = types.SimpleNamespace(functions=reward["functions"])
    prepared = types.SimpleNamespace(loader=None, val_loader=None, signal_configs={"cost": cost})
    with pytest.raises(HfsdkError) as info:
        environment_rows_check(config, None, prepared)
    assert str(info.value) == says.replace("reward.functions", "cost.functions")
    # With an environment it runs.
    lake = {"multi_turn": {"environment": "frozen_lake"}}
    config = resolve_run_config("grpo", {"rollout": lake, "reward": reward})
    assert environment_reward_problems(config) == []


def test_an_environment_beside_another_agent_loop_is_refused_in_one_line() -> None:
    # tool_loop never runs the environment: the run would fail only after its rollout
    clash = {"environment": "frozen_lake", "agent_loop": "tool_loop"}
    with pytest.raises(HfsdkError) as info:
        resolve_run_config("grpo", {"rollout": {"multi_turn": clash}})
    message = str(info.value)
    assert "\n" not in message
    assert (
        "rollout.multi_turn.agent_loop='tool_loop' with an environment: that loop never runs "
        "the environment (only environment_loop does); drop rollout.multi_turn.agent_loop or "
        "set it to environment_loop" in message
    )
    # environment_loop itself, or a loop built on it, runs the environment
    for loop in ("environment_loop", f"{counter_env.__name__}:OwnEnvironmentLoop"):
        multi_turn = {"environment": "frozen_lake", "agent_loop": loop}
        resolve_run_config("grpo", {"rollout": {"multi_turn": multi_turn}})


class Lookup:
    """A tool whose schema pattern backtracks exponentially on ``a...a!`` (``^(a+)+$``)."""

    def lookup(self, key: str, depth: int = 0) -> str:
        return f"{key}@{depth}:{type(depth).__name__}"


_BACKTRACKING = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a key up.",
        "parameters": {
            "type": "object",
            "properties": {
                "key": {"type": "string", "pattern": "^(a+)+$"},
                "depth": {"type": "integer"},
            },
            "required": ["key"],
        },
    },
}


def test_a_backtracking_schema_pattern_is_a_timeout_not_a_stalled_event_loop() -> None:
    # The schema check ran on the rollout's event loop: ^(a+)+$ on 28 a's and a '!' held
    # every trajectory for seconds (each character doubles it), past tool_timeout_s.
    tools = bound_tools({"lookup": _BACKTRACKING}, Lookup())

    async def run() -> tuple[object, float, float]:
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.02)

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        started = time.monotonic()
        out = await call_environment_tool(
            tools, "lookup", {"key": "a" * 28 + "!"}, timeout_s=0.5, max_output_chars=1000
        )
        took = time.monotonic() - started
        await asyncio.sleep(0.05)
        ticking.cancel()
        return out, took, max(b - a for a, b in itertools.pairwise(ticks))

    out, took, stall = asyncio.run(run())
    assert (out.ok, out.error) == (False, "timeout"), out
    assert out.content == (
        "Error: lookup was not called: checking its arguments against its schema took over "
        "0.5 s; send shorter or simpler arguments"
    )
    assert took < 1.5 and stall < 0.3, (took, stall)
    # The checker process was replaced: the next call is checked, converted and answered.
    ok = asyncio.run(
        call_environment_tool(
            tools, "lookup", {"key": "aaa", "depth": 2.0}, timeout_s=5, max_output_chars=100
        )
    )
    assert (ok.ok, ok.content) == (True, "aaa@2:int")
    bad = asyncio.run(
        call_environment_tool(tools, "lookup", {"key": "ab"}, timeout_s=5, max_output_chars=100)
    )
    assert (bad.error, bad.content) == (
        "bad_arguments",
        "Error: lookup: argument 'key': 'ab' does not match '^(a+)+$'",
    )
    wrong = asyncio.run(
        call_environment_tool(
            tools, "lookup", {"key": "a", "extra": 1}, timeout_s=5, max_output_chars=100
        )
    )
    assert (wrong.error, wrong.content) == (
        "bad_arguments",
        "Error: lookup: got an unexpected keyword argument 'extra'",
    )


def test_a_schema_without_patterns_is_checked_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every call went to the checker process (3 ms a call against 0.025 ms, and a fork on
    # the event loop at the first call); only ``pattern`` / ``patternProperties`` backtrack.
    from hfsdk_agents.environments import calls

    sent: list[str] = []
    run = calls._CHECKER.run

    async def counted(name: str, call: dict[str, object], timeout_s: float) -> object:
        sent.append(str(call["schema_json"]))
        return await run(name, call, timeout_s)

    monkeypatch.setattr(calls._CHECKER, "run", counted)
    spec = environment_spec("counter", counter_env.Counter)
    env = counter_env.Counter()
    env.reset({"target": 10})
    tools = bound_tools(spec.schemas, env)
    out = asyncio.run(
        call_environment_tool(tools, "bump", {"by": 1.0}, timeout_s=5, max_output_chars=100)
    )
    assert out.ok, out
    bad = asyncio.run(
        call_environment_tool(tools, "bump", {"by": "x"}, timeout_s=5, max_output_chars=100)
    )
    assert bad.error == "bad_arguments", bad
    assert sent == []
    # A pattern anywhere in the schema (here, nested in an array's items) goes to the worker.
    nested = {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "depth": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string", "pattern": "^a+$"}},
                },
                "required": ["key"],
            },
        },
    }
    tools = bound_tools({"lookup": nested}, Lookup())
    ok = asyncio.run(
        call_environment_tool(tools, "lookup", {"key": "k"}, timeout_s=5, max_output_chars=100)
    )
    assert ok.ok, ok
    assert len(sent) == 1
