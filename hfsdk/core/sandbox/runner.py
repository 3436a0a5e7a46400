"""Run a Python snippet in its own process with limits, and say what happened.

Layers, outermost first (each is used where the machine allows it):

1. a separate process in its own session, killed with its whole process
   group at the wall-clock limit — model-written code never runs in a worker;
2. kernel limits set before the program starts (by :mod:`.guard`, first
   thing): CPU time (``RLIMIT_CPU``), address space (``RLIMIT_AS``), the size of any file it writes
   (``RLIMIT_FSIZE``, which also caps stdout/stderr: they go to files), and
   no core dumps;
3. when running as root: a network namespace with no interfaces
   (``unshare --net``) and the unprivileged ``nobody`` user, which owns only
   the scratch directory and may start few processes (``RLIMIT_NPROC``);
4. inside the process, an audit hook (:mod:`.guard`) that refuses processes,
   sockets, writes outside the scratch directory and ``ctypes``;
5. a scratch directory as working directory, ``HOME`` and ``TMPDIR``,
   removed afterwards, and an empty environment otherwise.

Layer 3 is probed once per process and used where it works: the namespace
needs root and ``unshare``; the ``nobody`` user also needs an interpreter and
standard library others may read (a pyenv under ``/root`` is not). Layers 1,
2, 4 and 5 hold everywhere.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import attrs

from hfsdk.core.sandbox.limits import SandboxLimits

log = logging.getLogger(__name__)

Status = Literal["ok", "error", "timeout", "memory", "output_limit", "refused"]
GUARD = Path(__file__).with_name("guard.py")
NOBODY_UID = 65534


@attrs.frozen(kw_only=True)
class SandboxResult:
    """What one sandboxed run did.

    ``status``: ``ok`` (exit 0), ``error`` (an exception or a non-zero exit),
    ``timeout`` (wall-clock or CPU limit), ``memory`` (the memory limit),
    ``output_limit`` (wrote more than allowed), ``refused`` (the guard stopped
    a forbidden operation). ``stdout``/``stderr`` are cut at the output limit;
    ``reason`` is one line for metrics and logs.
    """

    status: Status
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    reason: str

    @property
    def ok(self) -> bool:
        """Whether the program ran to the end and exited 0."""
        return self.status == "ok"


def _interpreter() -> str:
    # The base interpreter, not a venv's link: ``-I -S`` needs only the standard library,
    # and the unprivileged user may not be able to enter the venv's directory.
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


@functools.cache
def _os_isolation() -> tuple[bool, bool]:
    """(network namespace works, dropping to ``nobody`` works) on this machine; probed once."""
    if os.name != "posix" or os.geteuid() != 0:
        return False, False
    unshare = shutil.which("unshare")
    netns = False
    if unshare:
        probe = subprocess.run([unshare, "--net", "true"], capture_output=True, timeout=10)
        netns = probe.returncode == 0
    scratch = Path(tempfile.mkdtemp(prefix="hfsdk-sandbox-probe-"))
    try:
        (scratch / "main.py").write_text("pass\n")
        shutil.copyfile(GUARD, scratch / ".guard.py")
        os.chown(scratch, NOBODY_UID, NOBODY_UID)
        probe = subprocess.run(
            _command(scratch, SandboxLimits(), drop=True, netns=False),
            capture_output=True,
            timeout=10,
            cwd=scratch,
        )
        nobody = probe.returncode == 0
    except (OSError, subprocess.SubprocessError):
        nobody = False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not (netns and nobody):
        log.info("sandbox: network namespace %s, unprivileged user %s", netns, nobody)
    return netns, nobody


def _command(scratch: Path, limits: SandboxLimits, *, drop: bool, netns: bool) -> list[str]:
    command = [
        _interpreter(),
        "-I",
        "-S",
        "-B",
        str(scratch / ".guard.py"),
        str(scratch),
        str(scratch / "main.py"),
        str(limits.cpu_s),
        str(limits.memory_mb * 1024 * 1024),
        str(limits.output_bytes),
        str(int(drop)),
    ]
    return [shutil.which("unshare") or "unshare", "--net", *command] if netns else command


def _read(path: Path, limit: int) -> tuple[str, bool]:
    data = path.read_bytes() if path.exists() else b""
    return data[:limit].decode("utf-8", errors="replace"), len(data) >= limit


def _classify(code: int | None, timed_out: bool, stderr: str, cut: bool) -> tuple[Status, str]:
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if timed_out or code in (-signal.SIGXCPU, -signal.SIGKILL):
        return "timeout", "timeout: the time limit was reached"
    if cut or code == -signal.SIGXFSZ:
        return "output_limit", "output_limit: the program wrote more than the output limit"
    if "MemoryError" in last or code == -signal.SIGSEGV:
        return "memory", "memory: the memory limit was reached"
    if "sandbox:" in last and "PermissionError" in last:
        return "refused", "refused: " + last.split("sandbox:", 1)[1].strip()
    if code == 0:
        return "ok", "ok"
    return "error", f"error: {last[:200] or f'exit status {code}'}"


def run_python(
    code: str, *, stdin: str = "", limits: SandboxLimits | None = None
) -> SandboxResult:
    """Run ``code`` as a program with ``stdin`` as its standard input, under ``limits``."""
    limits = limits or SandboxLimits()
    netns, nobody = _os_isolation()
    scratch = Path(tempfile.mkdtemp(prefix="hfsdk-sandbox-"))
    started = time.perf_counter()
    try:
        program = scratch / "main.py"
        program.write_text(code)
        (scratch / "stdin.txt").write_text(stdin)
        # A copy the unprivileged user can read wherever the package is installed.
        shutil.copyfile(GUARD, scratch / ".guard.py")
        if nobody:
            os.chown(scratch, NOBODY_UID, NOBODY_UID)
            os.chown(program, NOBODY_UID, NOBODY_UID)
        command = _command(scratch, limits, drop=nobody, netns=netns)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "TMPDIR": str(scratch)}
        out_path, err_path = scratch / ".stdout", scratch / ".stderr"
        with (
            open(scratch / "stdin.txt", "rb") as stdin_file,
            open(out_path, "wb") as out_file,
            open(err_path, "wb") as err_file,
        ):
            process = subprocess.Popen(
                command,
                stdin=stdin_file,
                stdout=out_file,
                stderr=err_file,
                cwd=scratch,
                env=env,
                start_new_session=True,
            )
            timed_out = False
            try:
                process.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # The whole session: whatever the program started goes with it.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        stdout, cut_out = _read(out_path, limits.output_bytes)
        stderr, cut_err = _read(err_path, limits.output_bytes)
        status, reason = _classify(process.returncode, timed_out, stderr, cut_out or cut_err)
        return SandboxResult(
            status=status,
            returncode=process.returncode,
            stdout=stdout,
            stderr=stderr,
            seconds=time.perf_counter() - started,
            reason=reason,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def default_concurrency() -> int:
    """How many sandboxed programs run at once: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def run_many(
    jobs: Sequence[tuple[str, str]],
    *,
    limits: SandboxLimits | None = None,
    concurrency: int | None = None,
) -> list[SandboxResult]:
    """Run ``(code, stdin)`` jobs, at most ``concurrency`` at once; results in job order."""
    if not jobs:
        return []
    workers = min(len(jobs), concurrency or default_concurrency())
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: run_python(job[0], stdin=job[1], limits=limits), jobs))
