"""Runs inside the sandboxed process, before the untrusted program (stdlib only).

Usage: ``python -I -S -B guard.py SCRATCH PROGRAM CPU_S MEMORY_BYTES FILE_BYTES DROP PARENT``.
It first sets the kernel limits (CPU seconds, address space, the size of any
file written — the scratch size —, open descriptors, no core dumps) and, when
``DROP`` is 1 (``process`` isolation as root), becomes the unprivileged
``nobody`` user with few processes allowed. When ``PARENT`` is a pid (``process``
isolation; 0 under bubblewrap, whose ``--die-with-parent`` does it), the kernel kills
the program when that parent dies. The limits hold whatever the program does next: it
cannot raise them.

It then installs an audit hook (PEP 578) that refuses, with a
``PermissionError`` naming the operation, what a program should not try:
processes, sockets, writes outside ``SCRATCH``, ``ctypes``. This is a
friendly early error, NOT a boundary: a program can reach the hook's globals
(``gc``, frames) and empty its event sets. The boundary is the operating
system's — bubblewrap's namespaces and the seccomp filter (see
``docs/agents.md#sandbox-layers``).
"""

import os
import sys

_PROCESS_EVENTS = {
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.kill",
    "os.killpg",
    "subprocess.Popen",
    "pty.spawn",
}
_NETWORK_EVENTS = {
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
}
_PATH_EVENTS = {
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.chown",
    "os.link",
    "os.symlink",
    "os.truncate",
    "os.utime",
    "shutil.rmtree",
    "shutil.move",
    "shutil.copyfile",
}
# _posixsubprocess is imported (its fork_exec replaced) before the hook, so subprocess and
# asyncio find it cached; a fresh import of it (after deleting it from sys.modules) is refused.
_BLOCKED_MODULES = ("ctypes", "_ctypes", "_posixsubprocess", "multiprocessing")
# Linux families that reach a network (AF_INET, AF_INET6, AF_NETLINK, AF_PACKET) or the host
# (AF_VSOCK: a virtual machine's channel, which no network namespace isolates). AF_UNIX stays
# allowed: asyncio's event loop needs socket.socketpair(), and the OS layers isolate it.
_NETWORK_FAMILIES = {2, 10, 16, 17, 40}
# Devices a program may open for writing: they reach nothing outside the sandbox.
_WRITABLE_DEVICES = {"/dev/null", "/dev/stdout", "/dev/stderr"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _inside(path: object, scratch: str) -> bool:
    if isinstance(path, int):  # an already open descriptor
        return True
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return False
    real = os.path.realpath(path)
    return real == scratch or real.startswith(scratch + os.sep)


def _writable_device(path: object) -> bool:
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    # The name as given, not its realpath: /dev/stdout resolves to a pipe, not a path.
    return isinstance(path, str) and os.path.abspath(path) in _WRITABLE_DEVICES


def _writes(mode: object, flags: object) -> bool:
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _hook(scratch: str):  # type: ignore[no-untyped-def]
    def refuse(what: str) -> None:
        raise PermissionError(f"sandbox: {what} is not allowed")

    def hook(event: str, args: tuple) -> None:
        if event in _PROCESS_EVENTS:
            refuse(f"starting or signalling processes ({event})")
        elif event == "socket.__new__":
            if args[1] in _NETWORK_FAMILIES:
                refuse(f"network access ({event})")
        elif event in _NETWORK_EVENTS:
            refuse(f"network access ({event})")
        elif event == "open":
            path, mode, flags = (*args, None, None, None)[:3]
            if _writes(mode, flags) and not (_inside(path, scratch) or _writable_device(path)):
                refuse(f"writing {path!r} outside the scratch directory")
        elif event in _PATH_EVENTS:
            for path in args[:2]:
                if isinstance(path, (str, bytes)) and not _inside(path, scratch):
                    refuse(f"{event} on {path!r} outside the scratch directory")
        elif event == "import":
            name = str(args[0])
            if name.split(".")[0] in _BLOCKED_MODULES:
                refuse(f"importing {name}")
        elif event.startswith("ctypes."):  # the guard's own prctl left ctypes' classes loaded
            refuse(f"calling native code ({event})")

    return hook


def _guard_fork_exec() -> None:
    """Make ``_posixsubprocess.fork_exec`` refuse: called directly, it starts a process without
    the subprocess.Popen audit event (subprocess imports it by name after this runs)."""
    import _posixsubprocess

    def fork_exec(*args: object) -> int:
        raise PermissionError(
            "sandbox: starting or signalling processes (_posixsubprocess.fork_exec) is not allowed"
        )

    _posixsubprocess.fork_exec = fork_exec


NOBODY = 65534
NOBODY_NPROC = 64  # processes nobody may own at once (every concurrent sandbox counts)
NOFILE = 256


def _limit(cpu_s: int, memory: int, file_bytes: int, drop: bool) -> None:
    import resource

    def cap(kind: int, soft: int, hard: int) -> None:
        # A host hard limit tighter than ours (`ulimit -f`, a supervisor's) stands: raising a
        # hard limit is refused, and the tighter one still bounds the program.
        host = resource.getrlimit(kind)[1]
        if host != resource.RLIM_INFINITY:
            soft, hard = min(soft, host), min(hard, host)
        resource.setrlimit(kind, (soft, hard))

    cap(resource.RLIMIT_CPU, cpu_s, cpu_s + 1)
    cap(resource.RLIMIT_AS, memory, memory)
    cap(resource.RLIMIT_FSIZE, file_bytes, file_bytes)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Open descriptors bound what pipes and other kernel buffers can hold outside RLIMIT_AS
    # (the inherited limit was 20000).
    cap(resource.RLIMIT_NOFILE, NOFILE, NOFILE)
    if drop:
        cap(resource.RLIMIT_NPROC, NOBODY_NPROC, NOBODY_NPROC)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


PR_SET_PDEATHSIG = 1
SIGKILL = 9  # a constant: after the uid drop, importing signal.py may fail


def _load_prctl():  # type: ignore[no-untyped-def]
    """libc's ``prctl``, loaded before the uid drop (``nobody`` may not read the stdlib).

    ctypes leaves ``sys.modules`` again, so the program's ``import ctypes`` still reaches
    the hook.
    """
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    for name in [m for m in sys.modules if m.split(".")[0] in ("ctypes", "_ctypes")]:
        del sys.modules[name]
    return prctl


def _die_with_parent(prctl, parent: int) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL this process when ``parent`` (the runner) dies: nothing else ends it then.

    Called after the uid drop, which clears the setting.
    """
    if prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0:
        raise OSError(
            "sandbox guard: prctl(PR_SET_PDEATHSIG) failed; the program would outlive its runner"
        )
    # The parent may have died before prctl: then no signal comes, and we were reparented.
    if os.getppid() != parent:
        os._exit(1)


def main() -> None:
    """Set the limits, install the guard, then run the program as ``__main__``."""
    scratch, program = os.path.realpath(sys.argv[1]), sys.argv[2]
    cpu_s, memory, file_bytes, drop, parent = (int(a) for a in sys.argv[3:8])
    # Both import native modules: before the uid drop, after which nobody may not read them.
    _guard_fork_exec()
    prctl = _load_prctl() if parent else None
    _limit(cpu_s, memory, file_bytes, bool(drop))
    if prctl is not None:
        _die_with_parent(prctl, parent)
    sys.argv = [program]
    sys.path.insert(0, scratch)
    with open(program, "rb") as handle:
        source = handle.read()
    # A fresh __main__ module, as runpy.run_path would make (runpy's imports cost ~50 ms of
    # start-up; a module object needs none).
    module = type(sys)("__main__")
    module.__file__ = program
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    code = compile(source, program, "exec")
    sys.addaudithook(_hook(scratch))
    exec(code, module.__dict__)


if __name__ == "__main__":
    main()
