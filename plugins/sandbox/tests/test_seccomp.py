"""The seccomp filter's decisions, checked by running its classic BPF here for both machines
(the kernel runs it in ``tests/core/cli/test_sandbox_command.py``)."""

from __future__ import annotations

import errno
import struct

import pytest

from hfsdk_sandbox import SandboxLimits, run_python
from hfsdk_sandbox.bwrap import unavailable_reason
from hfsdk_sandbox.runner import ISOLATION_ENV
from hfsdk_sandbox.seccomp import _SYSCALLS, REFUSED, UnsupportedMachine, build_filter
from hfsdk_sandbox.testing import DISARM_GUARD

ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
EAFNOSUPPORT = 0x00050000 | errno.EAFNOSUPPORT
ARCH = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}
CLONE_THREAD, CLONE_NEWUSER, CLONE_NEWNET = 0x10000, 0x10000000, 0x40000000


def _run(prog: bytes, nr: int, arch: int, arg0: int = 0) -> int:
    """A classic-BPF interpreter for the few opcodes the filter uses."""
    data = struct.pack("=iI", nr, arch) + b"\0" * 8 + struct.pack("=Q", arg0) + b"\0" * 40
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_each_refused_call_gets_eperm_and_the_rest_is_allowed(machine: str) -> None:
    column, arch = ARCH[machine]
    prog = build_filter(processes=False, machine=machine)
    for name in REFUSED:
        nr = _SYSCALLS[name][column]
        if nr is not None:
            assert _run(prog, nr, arch) == EPERM, name
    read, write = {"x86_64": (0, 1), "aarch64": (63, 64)}[machine]
    assert _run(prog, read, arch) == ALLOW and _run(prog, write, arch) == ALLOW
    assert _run(prog, 435, arch) == ENOSYS  # clone3: the C library falls back to clone


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("processes", [False, True])
def test_clone_starts_threads_never_namespaces_and_processes_only_when_allowed(
    machine: str, processes: bool
) -> None:
    column, arch = ARCH[machine]
    prog = build_filter(processes=processes, machine=machine)
    clone = _SYSCALLS["clone"][column]
    assert _run(prog, clone, arch, CLONE_THREAD | 0x00000100) == ALLOW
    assert _run(prog, clone, arch, CLONE_THREAD | CLONE_NEWUSER) == EPERM
    assert _run(prog, clone, arch, CLONE_NEWNET) == EPERM
    assert _run(prog, clone, arch, 0x11) == (ALLOW if processes else EPERM)  # fork's flags
    if machine == "x86_64":
        assert _run(prog, 57, arch) == (ALLOW if processes else EPERM)  # fork


def test_another_abi_ends_the_process() -> None:
    prog = build_filter(processes=False, machine="x86_64")
    assert _run(prog, 1, 0x40000003) == KILL  # i386 through int 0x80
    assert _run(prog, 0x40000000 | 1, ARCH["x86_64"][1]) == KILL  # x32


def test_an_unknown_machine_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedMachine, match="riscv64"):
        build_filter(processes=False, machine="riscv64")


# (socket, socketpair) numbers, written out here rather than read from the module under test.
SOCKET_CALLS = {"x86_64": (41, 53), "aarch64": (198, 199)}
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK = 1, 2, 10, 16, 17, 40


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("processes", [False, True])
def test_socket_and_socketpair_make_only_unix_sockets(machine: str, processes: bool) -> None:
    # vsock is not isolated by the network namespace: it reaches the host's channel.
    _, arch = ARCH[machine]
    prog = build_filter(processes=processes, machine=machine)
    for nr in SOCKET_CALLS[machine]:
        assert _run(prog, nr, arch, AF_UNIX) == ALLOW
        for family in (0, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK, 1 << 32 | AF_VSOCK):
            assert _run(prog, nr, arch, family) == EAFNOSUPPORT, (nr, family)


@pytest.mark.skipif(
    unavailable_reason() is not None, reason=f"bubblewrap cannot start: {unavailable_reason()}"
)
def test_a_sandboxed_program_cannot_make_a_vsock_or_inet_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ISOLATION_ENV, "os")
    code = DISARM_GUARD + (
        "import socket\n"
        "for name, family in (('vsock', 40), ('inet', 2), ('inet6', 10)):\n"
        "    try:\n"
        "        socket.socket(family, socket.SOCK_STREAM)\n"
        "        print(name, 'made')\n"
        "    except OSError as e:\n"
        "        print(name, 'errno', e.errno)\n"
        "a, b = socket.socketpair()\n"
        "a.sendall(b'u')\n"
        "print('unix', b.recv(1).decode())\n"
    )
    result = run_python(code, limits=SandboxLimits(wall_s=5.0, cpu_s=2, memory_mb=256))
    assert result.status == "ok", result.reason
    assert "guard disarmed" in result.stdout, result.stdout
    for name in ("vsock", "inet", "inet6"):
        assert f"{name} errno {errno.EAFNOSUPPORT}\n" in result.stdout, result.stdout
    assert "unix u\n" in result.stdout
