"""Tools run in a worker process that is killed at the deadline: nothing a tool does hangs us."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from typing import Any

import pytest

from hfsdk_agents.tool_worker import ToolWorkers
from hfsdk_agents.tools import Tool, ToolOutput, call_tool


async def blocks_async(a: int, b: int) -> int:
    """An async tool that blocks its event loop (the hang of issue 35)."""
    time.sleep(10_000)
    return a + b


def spins(a: int, b: int) -> int:
    """A sync tool that never returns."""
    while True:
        a += 1


def quick(a: int, b: int) -> int:
    """Returns at once."""
    return a + b


def slowish(a: int, b: int) -> int:
    """Returns after a moment."""
    time.sleep(0.6)
    return a * b


def exits(a: int, b: int) -> int:
    """Takes its worker down with it."""
    os._exit(3)


TOOLS = {f.__name__: Tool.from_function(f) for f in (blocks_async, spins, quick, slowish, exits)}


def _bounded(coroutine: Any, limit_s: float) -> tuple[Any, float]:
    """Run ``coroutine`` in a thread; fail (instead of hanging the suite) past ``limit_s``."""
    box: list[Any] = []
    started = time.perf_counter()
    thread = threading.Thread(target=lambda: box.append(asyncio.run(coroutine)), daemon=True)
    thread.start()
    thread.join(limit_s)
    assert box, f"the call did not return within {limit_s} s"
    return box[0], time.perf_counter() - started


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_blocking_async_and_spinning_tools_time_out_and_their_worker_is_killed() -> None:
    workers = ToolWorkers({name: t.fn for name, t in TOOLS.items()})
    try:
        threads_before = threading.active_count()
        for name in ("blocks_async", "spins"):

            async def one(name: str = name) -> ToolOutput:
                return await call_tool(
                    TOOLS,
                    name,
                    {"a": 1, "b": 2},
                    timeout_s=0.5,
                    max_output_chars=100,
                    runner=workers,
                )

            out, seconds = _bounded(one(), 20.0)
            assert (out.ok, out.error) == (False, "timeout"), out
            assert seconds < 5.0, seconds  # 0.5 s deadline, plus fork and kill on a busy host
            pids = [w.pid for w in workers.workers()]
            assert pids == [], f"the retired worker still runs: {pids}"
        # The next call gets a fresh worker and its answer.
        out, _ = _bounded(
            call_tool(
                TOOLS,
                "quick",
                {"a": 2, "b": 3},
                timeout_s=5.0,
                max_output_chars=100,
                runner=workers,
            ),
            20.0,
        )
        assert (out.ok, out.content) == (True, "5")
        assert workers.started == 3
        workers.close()
        # No spinning thread stays behind here: only the reader of a live worker ever ran.
        deadline = time.monotonic() + 5.0
        while threading.active_count() > threads_before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= threads_before
    finally:
        workers.close()


def test_a_timeout_does_not_fail_the_other_calls_of_its_worker() -> None:
    workers = ToolWorkers({name: t.fn for name, t in TOOLS.items()})

    async def turn() -> list[ToolOutput]:
        calls = [("spins", 0.3), ("slowish", 10.0), ("quick", 10.0)]
        return list(
            await asyncio.gather(
                *(
                    call_tool(
                        TOOLS,
                        name,
                        {"a": 3, "b": 4},
                        timeout_s=limit,
                        max_output_chars=100,
                        runner=workers,
                    )
                    for name, limit in calls
                )
            )
        )

    try:
        (spin, slow, fast), _ = _bounded(turn(), 30.0)
        assert spin.error == "timeout"
        assert (slow.ok, slow.content) == (True, "12")  # its worker retired, not killed early
        assert (fast.ok, fast.content) == (True, "7")
        assert workers.workers() == [] or all(not w.retired for w in workers.workers())
    finally:
        workers.close()


def test_a_tool_that_kills_its_worker_is_a_failed_call_and_the_next_call_works() -> None:
    workers = ToolWorkers({name: t.fn for name, t in TOOLS.items()})

    async def both() -> tuple[ToolOutput, ToolOutput]:
        kw: dict[str, Any] = {"timeout_s": 10.0, "max_output_chars": 100, "runner": workers}
        dead = await call_tool(TOOLS, "exits", {"a": 1, "b": 1}, **kw)
        return dead, await call_tool(TOOLS, "quick", {"a": 1, "b": 1}, **kw)

    try:
        (dead, after), _ = _bounded(both(), 30.0)
        assert (dead.ok, dead.error) == (False, "crashed")
        assert "exit status 3" in dead.content
        assert (after.ok, after.content) == (True, "2")
    finally:
        workers.close()


def test_closures_run_in_the_worker_and_close_kills_it() -> None:
    seen = {"calls": 0}

    def counter(step: int) -> int:
        seen["calls"] += step  # the worker's copy: the caller's dict is untouched
        return seen["calls"]

    tools = {"counter": Tool.from_function(counter)}
    workers = ToolWorkers({"counter": counter})
    try:

        async def twice() -> list[str]:
            kw: dict[str, Any] = {"timeout_s": 10.0, "max_output_chars": 100, "runner": workers}
            return [(await call_tool(tools, "counter", {"step": 2}, **kw)).content for _ in "ab"]

        outputs, _ = _bounded(twice(), 30.0)
        assert outputs == ["2", "4"]  # one worker keeps the tool's state between calls
        assert seen["calls"] == 0
        (worker,) = workers.workers()
        workers.close()
        assert not _alive(worker.pid)
    finally:
        workers.close()


def test_a_stop_request_cuts_waiting_calls_short() -> None:
    from hfsdk.core.stop_requests import clear_stop, request_stop

    workers = ToolWorkers({name: t.fn for name, t in TOOLS.items()})
    timer = threading.Timer(0.3, request_stop)
    try:
        timer.start()
        out, seconds = _bounded(
            call_tool(TOOLS, "blocks_async", {"a": 1, "b": 2}, timeout_s=1000.0,
                      max_output_chars=100, runner=workers),
            20.0,
        )  # fmt: skip
        assert (out.ok, out.error) == (False, "stopped")
        assert seconds < 5.0
        assert workers.workers() == []  # its worker was killed
        later, _ = _bounded(
            call_tool(TOOLS, "quick", {"a": 1, "b": 2}, timeout_s=5.0, max_output_chars=100,
                      runner=workers),
            20.0,
        )  # fmt: skip
        assert later.error == "stopped"  # nothing new starts while the run stops
    finally:
        timer.cancel()
        clear_stop()
        workers.close()


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie counts: it runs no more)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_what_a_tool_forked_goes_with_its_worker(tmp_path: Any) -> None:
    record = tmp_path / "grandchild"

    def forks(a: int) -> int:
        """Leaves a process behind (it holds the worker's socket), then hangs."""
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        record.write_text(str(pid))
        time.sleep(60)
        return a

    workers = ToolWorkers({"forks": forks})
    try:
        outcome, _ = _bounded(workers.run("forks", {"a": 1}, 1.0), 30.0)
        assert outcome[0] == "timeout"
        started = time.perf_counter()
        workers.close()
        # Before, the grandchild lived on and kept the socket open: close() waited 5 s.
        assert time.perf_counter() - started < 2.0
        grandchild = int(record.read_text())
        deadline = time.monotonic() + 5.0
        while not _gone(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(grandchild)
    finally:
        workers.close()


def test_a_worker_that_exits_while_a_process_it_started_holds_the_socket_crashed(
    tmp_path: Any,
) -> None:
    """The child's exit is noticed beside the socket: before, a grandchild that left the
    group (``setsid``) kept the socket open and the call waited its whole deadline, then
    reported a ``timeout``."""
    record = tmp_path / "grandchild"

    def leaves(a: int) -> int:
        """Starts a process out of the worker's group, then takes the worker down."""
        if os.fork() == 0:
            os.setsid()
            record.write_text(str(os.getpid()))
            time.sleep(60)
            os._exit(0)
        time.sleep(0.3)
        os._exit(5)

    workers = ToolWorkers({"leaves": leaves})
    try:
        (kind, text), took = _bounded(workers.run("leaves", {"a": 1}, 20.0), 30.0)
        assert (kind, "exit status 5" in text) == ("crashed", True), (kind, text)
        assert took < 5.0
    finally:
        workers.close()
        if record.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(record.read_text()), 9)


def local_text(a: int, b: int) -> str:
    """Returns a str of a class defined here, which pickle cannot send back."""

    class Text(str):
        pass

    return Text(a + b)


def test_a_return_that_cannot_be_sent_back_is_answered_at_once() -> None:
    # Unanswered, the call waited out its whole deadline and was called a timeout.
    tools = {f.__name__: Tool.from_function(f) for f in (local_text,)}
    workers = ToolWorkers({name: t.fn for name, t in tools.items()})
    try:
        kw: dict[str, Any] = {"timeout_s": 20.0, "max_output_chars": 100, "runner": workers}
        out, took = _bounded(call_tool(tools, "local_text", {"a": 1, "b": 2}, **kw), 30.0)
        assert (out.ok, out.content) == (True, "3") and took < 10
    finally:
        workers.close()


def test_arguments_that_cannot_be_sent_to_the_worker_are_bad_arguments() -> None:
    # A parser can be a plugin's: arguments too deep to pickle used to raise RecursionError
    # out of the rollout.
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    workers = ToolWorkers({"quick": quick})
    try:
        kind, text = asyncio.run(workers.run("quick", {"a": nested, "b": 1}, timeout_s=5.0))
        assert kind == "bad_arguments" and "cannot be sent to the tool worker" in text
        assert asyncio.run(workers.run("quick", {"a": 1, "b": 2}, timeout_s=5.0)) == ("ok", "3")
    finally:
        workers.close()


def _image_tool_outcome(images: tuple[Any, ...]) -> tuple[str, Any]:
    """What the worker answers for a tool named ``draw`` that returns ``images``."""
    from hfsdk_agents.tool_worker import ToolResult, _Call, _run_one

    def draw() -> ToolResult:
        return ToolResult(content="chart", images=images)

    return _run_one(draw, _Call(call_id=0, name="draw", arguments={}))


def test_a_tool_image_given_as_a_path_says_what_an_image_must_be() -> None:
    # The TypeError's message was replaced by "draw returned a ToolResult, not text or JSON".
    kind, message = _image_tool_outcome(("imgs/0.png",))
    assert kind == "bad_output"
    assert message.startswith("draw returned an image hfsdk cannot use: ")
    assert "an image must be a PIL image or encoded bytes, not str" in message


def test_tool_image_bytes_that_do_not_decode_are_a_tool_error_naming_the_tool() -> None:
    # They reached the vision rollout, which stopped the run mid-step in dataset wording.
    pytest.importorskip("PIL")
    kind, message = _image_tool_outcome((b"not a png",))
    assert kind == "bad_output"
    assert message.startswith("draw returned an image hfsdk cannot use: image 0 ")
    assert "\n" not in message
