"""The sandbox refuses or contains each attack, and runs honest programs as they are."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hfsdk_sandbox import SandboxLimits, run_many, run_python

pytestmark = pytest.mark.usefixtures("sandbox_any_isolation")

FAST = SandboxLimits(wall_s=3.0, cpu_s=2, memory_mb=256, output_bytes=4096)


def test_an_honest_program_reads_stdin_and_writes_stdout() -> None:
    result = run_python("a, b = map(int, input().split())\nprint(a + b)", stdin="2 40", limits=FAST)
    assert (result.status, result.stdout, result.returncode) == ("ok", "42\n", 0)


def test_it_may_write_inside_its_scratch_directory_which_is_gone_after() -> None:
    code = "import os\nopen('notes.txt', 'w').write('x')\nprint(os.getcwd(), sorted(os.listdir()))"
    result = run_python(code, limits=FAST)
    assert result.ok, result.reason
    assert "notes.txt" in result.stdout
    again = run_python("import os\nprint(sorted(os.listdir()))", limits=FAST)
    assert again.ok and "notes.txt" not in again.stdout


def test_an_exception_is_an_error_with_its_last_line() -> None:
    result = run_python("raise ValueError('boom')", limits=FAST)
    assert result.status == "error" and "ValueError: boom" in result.reason


@pytest.mark.parametrize(
    "code",
    ["while True:\n    pass", "import time\ntime.sleep(60)"],
    ids=["busy-loop", "sleep"],
)
def test_an_endless_program_is_stopped_at_the_limit(code: str) -> None:
    result = run_python(code, limits=FAST)
    assert result.status == "timeout"
    assert result.seconds < FAST.wall_s + 2


def test_a_fork_bomb_is_refused() -> None:
    result = run_python("import os\nwhile True:\n    os.fork()", limits=FAST)
    assert result.status == "refused" and "os.fork" in result.reason


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess\nsubprocess.run(['true'])",
        "import os\nos.system('true')",
        "import os\nos.execv('/bin/true', ['true'])",
        "import multiprocessing",
        "import ctypes",
    ],
    ids=["subprocess", "system", "exec", "multiprocessing", "ctypes"],
)
def test_starting_processes_or_native_code_is_refused(code: str) -> None:
    assert run_python(code, limits=FAST).status == "refused"


def test_a_memory_bomb_hits_the_memory_limit() -> None:
    result = run_python("block = bytearray(1 << 31)", limits=FAST)
    assert result.status == "memory"


@pytest.mark.parametrize(
    "code", ["print('x' * 10**7)", "while True:\n    print('y' * 1000)"], ids=["one", "loop"]
)
def test_huge_output_is_cut_and_reported(code: str) -> None:
    result = run_python(code, limits=FAST)
    assert result.status == "output_limit"
    assert 0 < len(result.stdout) <= FAST.output_bytes


def test_writes_and_deletes_outside_the_scratch_directory_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("keep")
    for code in (
        f"open({str(target)!r}, 'w').write('gone')",
        f"open({str(target)!r}, 'a').write('more')",
        f"import os\nos.remove({str(target)!r})",
        f"import os\nos.rename({str(target)!r}, 'stolen.txt')",
        f"import shutil\nshutil.rmtree({str(tmp_path)!r})",
    ):
        result = run_python(code, limits=FAST)
        assert result.status == "refused", (code, result.reason)
    assert target.read_text() == "keep"


def test_network_access_is_refused(loopback_listener: Callable[[float], Any]) -> None:
    # A real listener on the loopback address: a connection would reach it.
    listener = loopback_listener(3)
    port = listener.port
    code = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "s.sendall(b'leak')"
    )
    result = run_python(code, limits=FAST)
    assert not listener.finish()
    assert result.status == "refused" and "network" in result.reason


def test_the_environment_is_not_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HFSDK_SECRET_TOKEN", "s3cret")
    result = run_python("import os\nprint(sorted(os.environ))", limits=FAST)
    assert result.ok and "HFSDK_SECRET_TOKEN" not in result.stdout
    assert os.environ["HFSDK_SECRET_TOKEN"] == "s3cret"


def test_run_many_keeps_job_order_under_concurrency() -> None:
    jobs = [(f"print({i} * {i})", "") for i in range(6)]
    results = run_many(jobs, limits=FAST, concurrency=3)
    assert [r.stdout.strip() for r in results] == [str(i * i) for i in range(6)]
