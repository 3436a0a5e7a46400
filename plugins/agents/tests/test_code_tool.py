"""The ``python`` tool runs model code in the sandbox: each attack is an error turn, not harm."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hfsdk_agents import code_tool
from hfsdk_agents.tools import call_tool, load_tools
from hfsdk_sandbox import SandboxLimits

pytestmark = pytest.mark.usefixtures("sandbox_any_isolation")


@pytest.fixture(autouse=True)
def _fast_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = SandboxLimits(wall_s=2.0, cpu_s=2, memory_mb=256, output_bytes=4096)
    monkeypatch.setattr(code_tool, "CODE_TOOL_LIMITS", limits)


def run(code: str):
    tools = load_tools(["python"])
    return asyncio.run(
        call_tool(tools, "python", {"code": code}, timeout_s=20, max_output_chars=10_000)
    )


def test_an_honest_snippet_prints_its_result() -> None:
    out = run("print(sum(range(10)))")
    assert (out.ok, out.content) == (True, "45\n")


def test_a_fork_bomb_is_refused() -> None:
    out = run("import os\nwhile True:\n    os.fork()")
    assert not out.ok and out.error == "tool_error"
    assert "refused" in out.content and "os.fork" in out.content


def test_an_infinite_loop_times_out() -> None:
    out = run("while True:\n    pass")
    assert not out.ok and "timeout" in out.content


def test_huge_output_is_cut() -> None:
    out = run("print('x' * 10_000_000)")
    assert not out.ok and "output_limit" in out.content
    assert len(out.content) < 5000


def test_writing_outside_the_scratch_dir_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    out = run(f"open({str(target)!r}, 'w').write('x')")
    assert not out.ok and "refused" in out.content
    assert not target.exists()


def test_network_access_is_refused() -> None:
    out = run("import socket\nsocket.create_connection(('127.0.0.1', 9))")
    assert not out.ok and "refused" in out.content and "network" in out.content
