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


@pytest.mark.parametrize(
    "code",
    [
        "import asyncio\nprint(asyncio.run(asyncio.sleep(0, result=3)))",
        "import socket\na, b = socket.socketpair()\na.sendall(b'3')\nprint(b.recv(1).decode())",
        "import os\nopen(os.devnull, 'w').write('x')\nprint(3)",
    ],
    ids=["asyncio", "socketpair", "devnull"],
)
def test_harmless_programs_the_guard_once_refused_run(code: str) -> None:
    result = run_python(code, limits=FAST)
    assert (result.status, result.stdout) == ("ok", "3\n"), result.reason


@pytest.mark.parametrize(
    "code",
    [
        "import asyncio\nasyncio.run(asyncio.create_subprocess_exec('true'))",
        "import socket\nsocket.socket(socket.AF_INET6)",
        "import socket\nsocket.socket(40, socket.SOCK_STREAM)",  # AF_VSOCK: no netns holds it
        "import os\nos.remove(os.devnull)",
        "import _posixsubprocess\n_posixsubprocess.fork_exec(*[None] * 23)",
        # A fresh import would bring back the real fork_exec, which raises no audit event.
        "import sys\ndel sys.modules['_posixsubprocess']\nimport _posixsubprocess",
    ],
    ids=[
        "asyncio-subprocess",
        "inet6",
        "vsock",
        "remove-devnull",
        "fork-exec",
        "fork-exec-reimport",
    ],
)
def test_the_guard_still_refuses_processes_inet_sockets_and_device_changes(code: str) -> None:
    result = run_python(code, limits=FAST)
    assert result.status == "refused" and "not allowed" in result.reason, result.reason


# The guard's own prctl (process isolation) leaves ctypes' classes loaded: reached through
# object.__subclasses__(), a foreign function runs libc's system() unless the hook refuses it.
CTYPES_FROM_SUBCLASSES = """
seen, stack, found = set(), [object], None
while stack:
    cls = stack.pop()
    if cls in seen:
        continue
    seen.add(cls)
    if cls.__name__ == "_FuncPtr":
        found = cls
        break
    try:
        stack.extend(type.__subclasses__(cls))
    except TypeError:
        pass
class Handle:
    _handle = 0
found(("system", Handle()))(b"true")
"""


def test_the_guards_own_ctypes_is_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HFSDK_SANDBOX_ISOLATION", "process")
    result = run_python(CTYPES_FROM_SUBCLASSES, limits=FAST)
    assert result.status == "refused" and "calling native code" in result.reason, result.reason


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


def test_a_file_larger_than_the_output_limit_may_be_written_and_read_back() -> None:
    # The file-size limit is scratch_mb, not output_bytes (4096 here): stdout is a pipe.
    code = "open('big.bin', 'wb').write(b'x' * 100_000)\nprint(len(open('big.bin', 'rb').read()))"
    result = run_python(code, limits=FAST)
    assert (result.status, result.stdout) == ("ok", "100000\n"), result.reason


def _running_with_comm(mark: str) -> list[int]:
    """Pids of the live (not zombie) processes whose /proc/PID/comm is ``mark``."""
    import contextlib

    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if (
                entry.name.isdigit()
                and (entry / "comm").read_text().strip() == mark
                and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                found.append(int(entry.name))
    return found


def test_process_mode_program_dies_with_a_killed_worker() -> None:
    import signal
    import subprocess
    import sys
    import time

    from hfsdk_sandbox.runner import ISOLATION_ENV
    from hfsdk_sandbox.testing import DISARM_GUARD

    mark = "hfsdk" + os.urandom(4).hex()
    code = DISARM_GUARD + (
        f"open('/proc/self/comm', 'w').write({mark!r})\nimport time\nwhile True:\n    time.sleep(1)\n"
    )
    worker = (
        "import sys\nfrom hfsdk_sandbox import SandboxLimits, run_python\n"
        "run_python(sys.argv[1], limits=SandboxLimits(wall_s=2.0))"
    )
    env = {**os.environ, ISOLATION_ENV: "process"}
    parent = subprocess.Popen([sys.executable, "-c", worker, code], env=env)
    try:
        started = time.monotonic()
        while not _running_with_comm(mark) and time.monotonic() - started < 10:
            time.sleep(0.1)
        assert _running_with_comm(mark), "the sandboxed program never started"
    finally:
        parent.send_signal(signal.SIGKILL)  # a worker killed mid-run: its finally never runs
        parent.wait()
    time.sleep(2.0 + 2)  # past wall_s: nothing but the parent's death can have ended it
    survivors = _running_with_comm(mark)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    # The killed worker could not remove its scratch directory (a later sweep would, in 5 min).
    import tempfile

    from hfsdk_sandbox.scratch import PREFIX, remove_scratch

    for left in Path(tempfile.gettempdir()).glob(f"{PREFIX}{parent.pid}-*"):
        remove_scratch(left)
    assert survivors == []


def test_process_mode_ends_a_setsid_grandchild_and_reports_the_program_s_own_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contextlib
    import signal
    import time

    from hfsdk_sandbox.cgroup import make_pids_cgroup
    from hfsdk_sandbox.runner import ISOLATION_ENV
    from hfsdk_sandbox.testing import DISARM_GUARD

    monkeypatch.setenv(ISOLATION_ENV, "process")
    mark = "hfsdk" + os.urandom(4).hex()
    code = DISARM_GUARD + (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open('/proc/self/comm', 'w').write({mark!r})\n"
        "        time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "print('done')\n"
    )
    result = run_python(code, limits=FAST)
    time.sleep(0.3)
    survivors = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if (
                entry.name.isdigit()
                and (entry / "comm").read_text().strip() == mark
                # killed but not yet reaped (a zombie) is gone
                and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                survivors.append(int(entry.name))
                os.kill(int(entry.name), signal.SIGKILL)
    # It held the output pipes: the run was reported `timeout` at the wall-clock limit.
    assert (result.status, result.stdout.endswith("done\n")) == ("ok", True), result
    assert result.seconds < FAST.wall_s - 1
    probe = make_pids_cgroup(8)
    if probe is None:
        pytest.skip("no pids cgroup can be made here: process mode cannot end a setsid'd child")
    probe.remove()
    assert survivors == []


def test_a_host_ignoring_sigchld_gets_one_clear_error_and_its_group_killed() -> None:
    """Before: the kernel reaped the program itself (SIGCHLD ignored), so ``os.wait4`` raised
    a raw ``ChildProcessError`` out of run_python. Run in a worker process: this one's SIGCHLD
    handler stays as it is."""
    import signal
    import subprocess
    import sys

    from hfsdk_sandbox.runner import ISOLATION_ENV
    from hfsdk_sandbox.testing import DISARM_GUARD

    mark = "hfsdk" + os.urandom(4).hex()
    # A child in the program's process group holds the pipes open past the program's exit.
    code = DISARM_GUARD + (
        "import os, time\n"
        "if os.fork() == 0:\n"
        f"    open('/proc/self/comm', 'w').write({mark!r})\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "raise SystemExit(3)\n"
    )
    worker = (
        "import signal, sys\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "from hfsdk import HfsdkError\n"
        "from hfsdk_sandbox import SandboxLimits, run_python\n"
        "try:\n"
        "    run_python(sys.argv[1], limits=SandboxLimits(wall_s=3.0, cpu_s=2, memory_mb=256))\n"
        "except HfsdkError as e:\n"
        "    print('HfsdkError:', e)\n"
    )
    env = {**os.environ, ISOLATION_ENV: "process"}  # os mode's seccomp refuses the fork
    done = subprocess.run(
        [sys.executable, "-c", worker, code], env=env, capture_output=True, text=True, timeout=20
    )
    survivors = _running_with_comm(mark)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == (
        "HfsdkError: the sandboxed program's exit status and CPU time cannot be known: this "
        "process ignores SIGCHLD (signal.SIGCHLD is SIG_IGN), so the kernel reaped the program "
        "before hfsdk could; expected the default SIGCHLD handler; restore it with "
        "signal.signal(signal.SIGCHLD, signal.SIG_DFL) before running model code\n"
    )
    assert survivors == []


@pytest.mark.parametrize("status", [137, 152, 153, 139], ids=["KILL", "XCPU", "XFSZ", "SEGV"])
def test_an_exit_status_that_reads_as_a_signal_is_an_error_not_a_limit(status: int) -> None:
    # Under bubblewrap exit 128 + N reads as signal N: os._exit(137) was `timeout`, 153
    # `output_limit` and 139 `memory`, in 0.06 s, no limit near.
    # A CPU limit no run this short can reach on any machine (it needs cpu_s / cores seconds).
    limits = SandboxLimits(wall_s=3.0, cpu_s=600, memory_mb=256, output_bytes=4096)
    result = run_python(f"import os\nos._exit({status})", limits=limits)
    assert result.status == "error", result
    assert str(status) in result.reason or "killed by" in result.reason


@pytest.mark.parametrize(
    "code",
    [
        "while True:\n    pass",
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
    ],
    ids=["SIGXCPU", "SIGKILL-at-the-hard-limit"],
)
def test_the_cpu_limit_is_a_timeout_before_the_wall_clock_limit(code: str) -> None:
    limits = SandboxLimits(wall_s=30.0, cpu_s=1, memory_mb=256, output_bytes=4096)
    result = run_python(code, limits=limits)
    assert result.status == "timeout", result
    assert result.seconds < limits.wall_s - 5  # the CPU limit ended it, not the deadline


def test_a_lone_surrogate_in_the_code_is_that_program_s_error_and_stdin_passes() -> None:
    # write_text raised UnicodeEncodeError: the caller (a whole reward batch) failed.
    result = run_python("print('\ud83d')", limits=FAST)
    assert result.status == "error", result
    echoed = run_python(
        "import sys\nprint(len(sys.stdin.buffer.read()))", stdin="a\ud83d", limits=FAST
    )
    assert (echoed.status, echoed.stdout) == ("ok", "4\n"), echoed


def test_process_mode_removes_a_scratch_tree_deeper_than_the_recursion_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess
    import tempfile

    from hfsdk_sandbox.runner import ISOLATION_ENV
    from hfsdk_sandbox.testing import DISARM_GUARD

    monkeypatch.setenv(ISOLATION_ENV, "process")  # os mode's /box is a tmpfs inside bwrap
    # On a tmpfs where there is one: 2,000 levels on this machine's disk took seconds.
    shm = Path("/dev/shm")
    parent = Path(tempfile.mkdtemp(dir=shm if os.access(shm, os.W_OK | os.X_OK) else None))
    parent.chmod(0o755)  # the program may run as nobody
    monkeypatch.setattr(tempfile, "tempdir", str(parent))
    code = DISARM_GUARD + (
        "import os\nfor _ in range(2000):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')\n"
    )
    try:
        result = run_python(code, limits=SandboxLimits(wall_s=10.0, cpu_s=5, memory_mb=256))
        assert (result.status, result.stdout.endswith("deep\n")) == ("ok", True), result
        assert list(parent.iterdir()) == []  # the scratch directory is gone
    finally:
        subprocess.run(["rm", "-rf", "--", str(parent)], check=False)


@pytest.mark.parametrize(
    "stderr",
    [
        "Traceback (most recent call last):\n  ...\nMemoryError\n",
        "note: PermissionError: sandbox: cannot cache, continuing\n",
    ],
    ids=["MemoryError", "sandbox-PermissionError"],
)
def test_a_zero_exit_is_ok_whatever_its_last_stderr_line(stderr: str) -> None:
    from hfsdk_sandbox.runner import _classify

    # A program that caught the error and went on was `memory` / `refused` and scored 0.
    assert _classify(0, False, stderr, False) == ("ok", "ok")
    assert _classify(1, False, stderr, False)[0] in ("memory", "refused")


def test_a_program_that_catches_a_memory_error_and_exits_0_is_ok() -> None:
    code = (
        "import traceback\ntry:\n    b = bytearray(1 << 40)\nexcept MemoryError:\n"
        "    traceback.print_exc()\n    b = bytearray(10)\nprint(len(b))\n"
    )
    result = run_python(code, limits=FAST)
    assert (result.status, result.stdout) == ("ok", "10\n"), result


@pytest.mark.parametrize("mode", ["os", "process"])
def test_dev_stdout_and_stderr_may_be_opened_by_a_program_run_as_nobody(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk_sandbox.bwrap import unavailable_reason
    from hfsdk_sandbox.runner import ISOLATION_ENV, _process_isolation

    if os.geteuid() != 0:
        pytest.skip("the program runs as nobody only where the caller is root")
    if mode == "os" and unavailable_reason() is not None:
        pytest.skip(f"bubblewrap cannot start here ({unavailable_reason()})")
    if mode == "process" and not _process_isolation()[1]:
        pytest.skip("process mode cannot drop to nobody here (interpreter not readable by others)")
    monkeypatch.setenv(ISOLATION_ENV, mode)
    # The pipes were root's, mode 0600: nobody got EACCES reopening them by name.
    code = (
        "out = open('/dev/stdout', 'w')\nout.write('7\\n')\nout.close()\n"
        "err = open('/dev/stderr', 'w')\nerr.write('warn\\n')\nerr.close()\n"
    )
    result = run_python(code, limits=FAST)
    assert (result.status, result.stdout, result.stderr) == ("ok", "7\n", "warn\n"), result


def test_twenty_threads_start_under_the_default_memory_limit() -> None:
    # Each glibc malloc arena reserved 64 MiB of address space: ~14 threads fit in 512 MiB.
    code = (
        "from concurrent.futures import ThreadPoolExecutor\nimport time\n"
        "def work(x):\n    time.sleep(0.1)\n    return [x] * 1000\n"
        "with ThreadPoolExecutor(20) as pool:\n"
        "    print(sum(len(r) for r in pool.map(work, range(40))))\n"
    )
    result = run_python(code, limits=SandboxLimits(wall_s=5.0, cpu_s=5, memory_mb=512))
    assert (result.status, result.stdout) == ("ok", "40000\n"), result


def test_a_program_that_sleeps_then_exits_137_is_an_error_not_a_timeout() -> None:
    # Judged from wall-clock seconds (>= cpu_s / cores), a sleeper's exit 137 (SIGKILL under
    # bubblewrap) was called `timeout`; it spent almost no CPU time.
    limits = SandboxLimits(wall_s=4.0, cpu_s=1, memory_mb=256, output_bytes=4096)
    result = run_python("import os, time\ntime.sleep(1.5)\nos._exit(137)", limits=limits)
    assert result.status == "error", result


def test_a_host_hard_limit_below_the_sandbox_s_is_kept_and_the_program_runs() -> None:
    import subprocess
    import sys

    # `ulimit -f` at 20 MiB, below the 64 MiB scratch size: setrlimit raised in the guard and
    # every program failed with its traceback.
    worker = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (20 << 20, 20 << 20))\n"
        "from hfsdk_sandbox import SandboxLimits, run_python\n"
        "r = run_python(\"print('hello')\", limits=SandboxLimits(wall_s=5.0, cpu_s=2))\n"
        "print(r.status, repr(r.stdout), r.reason[:300])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", worker], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.startswith("ok 'hello\\n'"), done.stdout + done.stderr[-300:]


def test_a_subreaper_caller_is_left_no_zombies_by_timed_out_runs() -> None:
    import subprocess
    import sys

    # A trainer as a container's PID 1 (or a child subreaper) inherits what the killed launcher
    # leaves: unreaped, each timed-out run left zombies until a per-user process limit was hit.
    worker = (
        "import ctypes, os, time\n"
        "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER\n"
        "from hfsdk_sandbox import SandboxLimits, run_python\n"
        "for _ in range(2):\n"
        "    r = run_python('while True: pass', limits=SandboxLimits(wall_s=0.5, cpu_s=2))\n"
        "    print(r.status)\n"
        "time.sleep(0.5)\n"
        "me, zombies = os.getpid(), []\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        stat = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()\n"
        "    except OSError:\n"
        "        continue\n"
        "    if int(stat[1]) == me and stat[0] == 'Z':\n"
        "        zombies.append(pid)\n"
        "print('zombies', zombies)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", worker], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.endswith("timeout\ntimeout\nzombies []\n"), done.stdout + done.stderr
