"""Run a Python snippet in its own sandbox with limits, and say what happened.

Two isolation modes (``sandbox.isolation`` in a run config, or the
``HFSDK_SANDBOX_ISOLATION`` environment variable, which child processes inherit):

``os`` (the default): bubblewrap (:mod:`.bwrap`) — new user, PID, network,
IPC, UTS, cgroup and mount namespaces, a root holding only the interpreter,
its standard library and the shared libraries, uid 65534 (bubblewrap itself
starts as host uid 65534 where the caller is root, what that uid cannot reach
staged in a mount namespace of its own: :func:`.bwrap.launcher`), an almost empty
environment (:data:`.limits.CHILD_ENV`), a seccomp filter (:mod:`.seccomp`) that refuses namespace,
tracing and kernel-surface calls and new processes. Where bubblewrap cannot start, model
code is refused (status ``refused``) rather than run with less.

``process``: today's weaker layers, for machines without user namespaces: a
process in its own session, an empty network namespace and the ``nobody``
user where the caller is root and the interpreter is readable by others.
It does not stop a program from reading what the caller's user may read.

In both, a pids cgroup (:mod:`.cgroup`) where one can be made, the kernel
limits (CPU, address space, file size = scratch size, open files, no core dumps) and
the audit hook of :mod:`.guard` — a friendly early error, not a boundary —
are set before the program starts; stdout and stderr come back through pipes
read with a byte cap and the wall-clock deadline, until the launched process
ends (:mod:`.pipes`); the scratch directory is private (:mod:`.scratch`); the whole
process group (and cgroup) is killed at the end.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import attrs

from hfsdk import HfsdkError
from hfsdk_sandbox import bwrap
from hfsdk_sandbox.cgroup import PidsCgroup, make_pids_cgroup
from hfsdk_sandbox.limits import CHILD_ENV, SandboxLimits
from hfsdk_sandbox.pipes import drain
from hfsdk_sandbox.scratch import make_scratch, remove_scratch
from hfsdk_sandbox.seccomp import build_filter

log = logging.getLogger(__name__)

Status = Literal["ok", "error", "timeout", "memory", "output_limit", "refused"]
Isolation = Literal["os", "process"]
ISOLATIONS: tuple[Isolation, ...] = ("os", "process")
ISOLATION_ENV = "HFSDK_SANDBOX_ISOLATION"
GUARD = Path(__file__).with_name("guard.py")
NOBODY_UID = 65534
_WRAP_IN_CGROUP = 'echo $$ > "$1" || exit 125; shift; exec "$@"'
# Every way to pick process isolation: a run config, `hfsdk sandbox run`, and the environment
# (the only one `hfsdk reward score` takes).
_HOW_TO_PROCESS = (
    "sandbox.isolation: process in the run config, --isolation process for hfsdk sandbox run, "
    f"or {ISOLATION_ENV}=process in the environment"
)


@attrs.frozen(kw_only=True)
class SandboxResult:
    """What one sandboxed run did.

    ``status``: ``ok`` (exit 0), ``error`` (an exception or a non-zero exit),
    ``timeout`` (wall-clock or CPU limit), ``memory`` (the memory limit),
    ``output_limit`` (wrote more than allowed), ``refused`` (the guard stopped
    a forbidden operation, or no sandbox could start). ``stdout``/``stderr``
    are cut at the output limit; ``reason`` is one line for metrics and logs.
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

    def to_dict(self) -> dict[str, object]:
        """Plain data (``hfsdk sandbox run --json``)."""
        return attrs.asdict(self)


def isolation() -> Isolation:
    """The isolation mode this process uses: ``HFSDK_SANDBOX_ISOLATION``, default ``os``
    (unset or empty).

    Raises :class:`~hfsdk.HfsdkError` for any other value: ``Process`` was run as ``os`` without
    a word, and its model code was refused where the caller had asked for ``process``.
    """
    value = os.environ.get(ISOLATION_ENV) or "os"
    if value not in ISOLATIONS:
        raise HfsdkError(
            f"{ISOLATION_ENV}={value!r} is not a sandbox isolation mode; expected one of "
            f"{', '.join(repr(mode) for mode in ISOLATIONS)} (lower case): set it to one of them "
            "or unset it for 'os' (docs/agents.md#sandbox-layers)"
        )
    return value  # type: ignore[return-value]


def set_isolation(mode: Isolation) -> None:
    """Use ``mode`` here and in the processes started from here (an environment variable)."""
    if mode not in ISOLATIONS:
        raise ValueError(f"sandbox isolation {mode!r}; expected one of {list(ISOLATIONS)}")
    os.environ[ISOLATION_ENV] = mode


def unavailable_line(mode: Isolation | None = None) -> str | None:
    """One line when model code would be refused or weakly isolated here, else ``None``."""
    mode = mode or isolation()
    reason = bwrap.unavailable_reason()
    if reason is None:
        return None
    if mode == "process":
        return (
            f"sandbox: bubblewrap cannot start here ({reason}); model code runs with the weaker "
            "process isolation (sandbox.isolation: process; see docs/agents.md#sandbox-layers)"
        )
    return (
        f"sandbox: bubblewrap cannot start here ({reason}); model code will be refused — "
        f"enable user namespaces, or accept weaker isolation with {_HOW_TO_PROCESS} "
        "(docs/agents.md#sandbox-layers)"
    )


@functools.cache
def _process_isolation() -> tuple[bool, bool]:
    """(netns works, dropping to ``nobody`` works) in ``process`` mode; probed once."""
    if os.name != "posix" or os.geteuid() != 0:
        return False, False
    unshare = shutil.which("unshare")
    netns = False
    if unshare:
        probe = subprocess.run([unshare, "--net", "true"], capture_output=True, timeout=10)
        netns = probe.returncode == 0
    scratch = make_scratch(kind="probe-")
    try:
        # Imports after the drop: nobody must be able to read the standard library too.
        (scratch / "main.py").write_text("import json, decimal, fractions\n")
        shutil.copyfile(GUARD, scratch / ".guard.py")
        os.chown(scratch, NOBODY_UID, NOBODY_UID)
        probe = subprocess.run(
            _process_command(scratch, SandboxLimits(), drop=True, netns=False),
            capture_output=True,
            timeout=10,
            cwd=scratch,
        )
        nobody = probe.returncode == 0
    except (OSError, subprocess.SubprocessError):
        nobody = False
    finally:
        remove_scratch(scratch)
    if not (netns and nobody):
        log.info("sandbox: network namespace %s, unprivileged user %s", netns, nobody)
    return netns, nobody


def _guard_args(limits: SandboxLimits, drop: bool, parent: int = 0) -> list[str]:
    return [
        str(limits.cpu_s),
        str(limits.memory_mb * 1024 * 1024),
        # RLIMIT_FSIZE: the working directory's size, not output_bytes — stdout and stderr are
        # pipes, capped by drain(); output_bytes here failed any file over 64 KiB with EFBIG.
        str(limits.scratch_mb * 1024 * 1024),
        str(int(drop)),
        # The pid the program dies with (0: none); bubblewrap's --die-with-parent does it there.
        str(parent),
    ]


def _process_command(scratch: Path, limits: SandboxLimits, *, drop: bool, netns: bool) -> list[str]:
    command = [
        bwrap.interpreter(),
        "-I",
        "-S",
        "-B",
        str(scratch / ".guard.py"),
        str(scratch),
        str(scratch / "main.py"),
        # This process starts it (unshare execs it in place): a killed worker ends it too.
        *_guard_args(limits, drop, parent=os.getpid()),
    ]
    return [shutil.which("unshare") or "unshare", "--net", *command] if netns else command


# The share of cpu_s a run must have spent (its rusage) for a SIGXCPU/SIGKILL death to be the
# CPU limit: the kernel signals at cpu_s of CPU time, a little slack for accounting.
_CPU_REACHED = 0.9


class _Child:
    """The launched process, reaped with ``os.wait4`` for its CPU time (``cpu_s``).

    ``wait4`` on the pid, not ``RUSAGE_CHILDREN`` deltas: runs share this process from several
    threads. Its usage includes the descendants it reaped (bwrap and the program). The
    exit status is stored as ``Popen.returncode``, so ``Popen`` never reaps the pid again.

    Where the pid was reaped by someone else (the kernel, when this process ignores SIGCHLD),
    ``poll`` and ``wait`` raise :class:`~hfsdk.HfsdkError`: the exit status is lost, and
    reporting one (``Popen`` reads the lost status as 0) would score a run never seen to end
    well. The caller's ``finally`` still kills the process group and the cgroup.
    """

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.cpu_s = 0.0

    def _reaped(self, pid: int, status: int, usage: resource.struct_rusage) -> None:
        if pid:
            self.process.returncode = os.waitstatus_to_exitcode(status)
            self.cpu_s = usage.ru_utime + usage.ru_stime

    def _wait4(self, options: int) -> None:
        try:
            self._reaped(*os.wait4(self.process.pid, options))
        except ChildProcessError:  # ECHILD: the pid is gone, reaped by someone else
            if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
                cause = (
                    "this process ignores SIGCHLD (signal.SIGCHLD is SIG_IGN), so the kernel "
                    "reaped the program before hfsdk could; expected the default SIGCHLD "
                    "handler; restore it with signal.signal(signal.SIGCHLD, signal.SIG_DFL) "
                    "before running model code"
                )
            else:
                cause = (
                    "something else in this process reaped the program before hfsdk could "
                    "(os.wait(), os.waitpid(-1, ...) or a SIGCHLD handler that reaps); "
                    "expected hfsdk to reap the programs it starts; reap only your own pids "
                    "while model code runs"
                )
            # from None: the raw ECHILD adds nothing, and when the caller's final wait()
            # raises this again while the first propagates, the error is shown once.
            raise HfsdkError(
                f"the sandboxed program's exit status and CPU time cannot be known: {cause}"
            ) from None

    def poll(self) -> int | None:
        """The exit status once the process has ended, else ``None`` (never blocks)."""
        if self.process.returncode is None:
            self._wait4(os.WNOHANG)
        return self.process.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        if timeout is None:
            while self.process.returncode is None:
                self._wait4(0)
            return self.process.returncode
        end = time.monotonic() + timeout
        delay = 0.0005
        while (code := self.poll()) is None:  # as Popen.wait(timeout) does: no blocking wait
            left = end - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(self.process.args, timeout)
            time.sleep(min(delay, left, 0.05))
            delay *= 2
        return code


PR_GET_CHILD_SUBREAPER = 37


def _inherits_orphans() -> bool:
    """Whether orphaned descendants are reparented to this process: it is PID 1 (a container's
    init) or a child subreaper. Then nobody else reaps what a killed launcher leaves."""
    if os.getpid() == 1:
        return True
    import ctypes

    flag = ctypes.c_int(0)
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and bool(flag)


def _descendants(pid: int) -> list[int]:
    """The pids below ``pid`` now (by ``/proc/PID/task/TID/children``; gone ones skipped)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        tasks = Path(f"/proc/{parent}/task")
        with contextlib.suppress(OSError):
            for task in tasks.iterdir():
                with contextlib.suppress(OSError):
                    kids = [int(k) for k in (task / "children").read_text().split()]
                    found += kids
                    todo += kids
    return found


def _reap_orphans(pids: list[int], wait_s: float = 2.0) -> None:
    """Reap those of ``pids`` reparented to this process once they die (SIGKILLed already).

    Only these pids, never ``waitpid(-1)``: other children of the caller are not ours to reap.
    A pid that is gone, or still another process's child after ``wait_s``, is left alone.
    """
    pending = set(pids)
    until = time.monotonic() + wait_s
    while pending and time.monotonic() < until:
        for pid in list(pending):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    pending.discard(pid)
            except ChildProcessError:  # not (yet) ours: its parent may still be exiting
                if not os.path.exists(f"/proc/{pid}"):
                    pending.discard(pid)
        if pending:
            time.sleep(0.01)


def _exit_words(code: int | None, signal_exit: bool) -> str:
    """``code`` in words: a signal by name; under bubblewrap also the exit status it equals."""
    if code is None or code >= 0:
        return f"exit status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    # bwrap reports exit(128 + N) and death by signal N alike: either may have happened.
    return f"killed by {name} or exit status {128 - code}" if signal_exit else f"killed by {name}"


def _classify(
    code: int | None,
    timed_out: bool,
    stderr: str,
    cut: bool,
    *,
    cpu_reached: bool = False,
    signal_exit: bool = False,
) -> tuple[Status, str]:
    """The status and reason of a run from what the parent observed.

    A limit is named only when the parent saw it reached: the output cap (``cut``), the
    wall-clock deadline (``timed_out``), the CPU limit (``cpu_reached``: the program killed by
    SIGXCPU or SIGKILL after spending about ``cpu_s`` of CPU time, by its rusage), a
    ``MemoryError``. An exit status alone proves nothing: under bubblewrap ``os._exit(137)``
    reads as SIGKILL and was reported ``timeout``. SIGXFSZ (the file-size limit is the scratch
    size, and Python ignores the signal: a full scratch is an ``OSError``) and SIGSEGV (a
    crash, such as a stack overflow) are errors, named in the reason. Exit status 0 (not cut,
    not timed out) is ``ok`` whatever stderr says; its last line is read only for a failure.
    """
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if cut:  # before timeout: the parent kills at the cap
        return "output_limit", "output_limit: the program wrote more than the output limit"
    if timed_out or (cpu_reached and code in (-signal.SIGXCPU, -signal.SIGKILL)):
        return "timeout", "timeout: the time limit was reached"
    # Before stderr: a program that caught a MemoryError or the guard's PermissionError, said
    # so on stderr and went on to exit 0 was reported `memory` / `refused` (and scored 0).
    if code == 0:
        return "ok", "ok"
    if "MemoryError" in last:
        return "memory", "memory: the memory limit was reached"
    if "sandbox:" in last and "PermissionError" in last:
        return "refused", "refused: " + last.split("sandbox:", 1)[1].strip()
    return "error", f"error: {last[:200] or _exit_words(code, signal_exit)}"


def _execute(
    argv: list[str],
    *,
    stdin_path: Path,
    cwd: Path,
    limits: SandboxLimits,
    pass_fds: tuple[int, ...] = (),
    cgroup: PidsCgroup | None = None,
    signal_exit: bool = False,
    launch: bool = False,
    as_nobody: bool = False,
) -> tuple[int | None, bytes, bytes, bool, bool, float]:
    """Run ``argv``; (return code, stdout, stderr, cut at the cap, past the deadline, CPU
    seconds it spent).

    ``signal_exit``: the launcher reports a program killed by signal N as exit
    status 128 + N (bwrap does); it is turned back into ``-N`` like subprocess's.
    ``launch``: start ``argv`` (bwrap's) through :func:`bwrap.launcher`, which joins the cgroup,
    starts it as host uid 65534 where the caller is root, and reaps what bwrap leaves (without
    it, the program's CPU time never reached this process's ``wait4``).
    ``as_nobody``: the program runs as host uid 65534 (the launcher's drop, or the guard's in
    ``process`` mode).
    """
    if launch:
        # cwd: the run's private scratch directory, where the launcher stages what 65534
        # cannot reach (in a mount namespace of its own; see bwrap._stage).
        argv = bwrap.launcher(argv, cgroup.procs if cgroup is not None else None, cwd)
    elif cgroup is not None:
        argv = ["/bin/sh", "-c", _WRAP_IN_CGROUP, "hfsdk-sandbox", str(cgroup.procs), *argv]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if as_nobody:
        # The program's ends of the pipes are its own: owned by root, mode 0600, its
        # open('/dev/stdout', 'w') (a reopen through /proc/self/fd) failed with EACCES.
        for fd in (out_w, err_w):
            os.fchown(fd, NOBODY_UID, NOBODY_UID)
    deadline = time.monotonic() + limits.wall_s
    try:
        with open(stdin_path, "rb") as stdin_file:
            process = subprocess.Popen(
                argv,
                stdin=stdin_file,
                stdout=out_w,
                stderr=err_w,
                cwd=cwd,
                # Process mode's program gets this as is; bubblewrap clears it and sets its own.
                env=dict(CHILD_ENV),
                start_new_session=True,
                pass_fds=pass_fds,
            )
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    child = _Child(process)
    try:
        drained = drain(
            out_r,
            err_r,
            cap=limits.output_bytes,
            deadline=deadline,
            # A setsid'd grandchild holding the pipes must not turn a finished run into a
            # timeout; it is killed below with the cgroup.
            exited=lambda: child.poll() is not None,
        )
        timed_out = drained.timed_out
        if not (drained.over_cap or timed_out):
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        # Killed with the launcher, bwrap and the program are reparented to a PID 1 or
        # subreaper caller, which nobody else reaps for: noted now, reaped after the kill.
        orphans = _descendants(process.pid) if _inherits_orphans() else []
        # The whole session, and the cgroup: whatever the program started goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if cgroup is not None:
            cgroup.kill_all()
        child.wait()
        if orphans:
            _reap_orphans(orphans)
    code = process.returncode
    if signal_exit and code is not None and 128 < code < 128 + signal.NSIG:
        code = -(code - 128)
    return code, drained.stdout, drained.stderr, drained.over_cap, timed_out, child.cpu_s


def _refused(reason: str) -> SandboxResult:
    return SandboxResult(
        status="refused", returncode=None, stdout="", stderr="", seconds=0.0, reason=reason
    )


def run_python(code: str, *, stdin: str = "", limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``code`` as a program with ``stdin`` as its standard input, under ``limits``."""
    limits = limits or SandboxLimits()
    mode = isolation()
    if mode == "os" and (problem := bwrap.unavailable_reason()) is not None:
        return _refused(
            f"refused: bubblewrap cannot start here ({problem}); to run model code with weaker "
            f"isolation use {_HOW_TO_PROCESS}"
        )
    scratch = make_scratch()
    started = time.perf_counter()
    cgroup: PidsCgroup | None = None
    try:
        program = scratch / "main.py"
        # surrogatepass: a lone surrogate (model output) raised UnicodeEncodeError and ended
        # the whole reward call; written as is, the program fails to compile (its own error)
        # and stdin reaches the program as the bytes it was given.
        program.write_text(code, encoding="utf-8", errors="surrogatepass")
        (scratch / "stdin.txt").write_text(stdin, encoding="utf-8", errors="surrogatepass")
        # A copy inside the scratch directory: readable wherever the package is installed.
        shutil.copyfile(GUARD, scratch / ".guard.py")
        if mode == "os":
            seccomp_r, seccomp_w = os.pipe()
            try:
                os.write(seccomp_w, build_filter(processes=False))
            finally:
                os.close(seccomp_w)
            try:
                cgroup = make_pids_cgroup(limits.max_tasks)
                with open(program, "rb") as code_file, open(scratch / ".guard.py", "rb") as guard:
                    argv = bwrap.command(
                        bwrap=bwrap.bwrap_path() or "bwrap",
                        program_fd=code_file.fileno(),
                        guard_fd=guard.fileno(),
                        seccomp_fd=seccomp_r,
                        scratch_bytes=limits.scratch_mb * 1024 * 1024,
                        guard_args=_guard_args(limits, drop=False),
                    )
                    result = _execute(
                        argv,
                        stdin_path=scratch / "stdin.txt",
                        cwd=scratch,
                        limits=limits,
                        pass_fds=(seccomp_r, code_file.fileno(), guard.fileno()),
                        cgroup=cgroup,
                        signal_exit=True,
                        launch=True,
                        as_nobody=bwrap.drops_privileges(),
                    )
            finally:
                os.close(seccomp_r)
        else:
            netns, nobody = _process_isolation()
            if nobody:
                os.chown(scratch, NOBODY_UID, NOBODY_UID)
                os.chown(program, NOBODY_UID, NOBODY_UID)
            # The cgroup ends what a setsid'd grandchild left running (killpg misses it).
            cgroup = make_pids_cgroup(limits.max_tasks)
            result = _execute(
                _process_command(scratch, limits, drop=nobody, netns=netns),
                stdin_path=scratch / "stdin.txt",
                cwd=scratch,
                limits=limits,
                cgroup=cgroup,
                as_nobody=nobody,
            )
        returncode, out, err, cut, timed_out, cpu_seconds = result
        seconds = time.perf_counter() - started
        stdout = out.decode("utf-8", errors="replace")
        stderr = err.decode("utf-8", errors="replace")
        status, reason = _classify(
            returncode,
            timed_out,
            stderr,
            cut,
            # The CPU time it spent (rusage), not wall-clock seconds: a program that slept, then
            # exited 137 (SIGKILL under bubblewrap) was called `timeout`.
            cpu_reached=cpu_seconds >= limits.cpu_s * _CPU_REACHED,
            signal_exit=mode == "os",
        )
        return SandboxResult(
            status=status,
            returncode=returncode,
            stdout=stdout,
            stderr=stderr,
            seconds=seconds,
            reason=reason,
        )
    finally:
        if cgroup is not None:
            cgroup.remove()
        # Not shutil.rmtree: a process-mode program's deep tree made it raise RecursionError.
        remove_scratch(scratch)


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
