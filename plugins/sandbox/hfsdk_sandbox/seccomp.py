"""A seccomp filter for sandboxed programs, compiled to classic BPF (handed to ``bwrap --seccomp``).

The filter refuses, with ``EPERM``, the system calls a program could use to
leave or widen its namespaces (``setns``, ``unshare``, ``mount`` and the new
mount API, ``pivot_root``, ``chroot``, ``clone`` with a ``CLONE_NEW*`` flag),
to reach other processes (``ptrace``, ``process_vm_readv``/``writev``,
``kcmp``, ``pidfd_getfd``, ``pidfd_send_signal``), or the kernel's larger
attack surface (``bpf``, ``keyctl``, ``add_key``, ``perf_event_open``,
``userfaultfd``, ``io_uring_*``, modules, ``kexec``, ``open_by_handle_at``…),
or to hold memory the address-space limit does not count (``memfd_create``,
``shmget``).
``socket`` and ``socketpair`` make only ``AF_UNIX`` sockets (``asyncio`` needs a
``socketpair()``; the network namespace holds them); any other family answers
``EAFNOSUPPORT``: ``AF_VSOCK`` reaches the host's virtual-machine channel, which
no namespace isolates, and ``AF_INET``/``AF_INET6`` reach nothing a program
needs inside an empty network namespace.
With ``processes=False`` it also refuses new processes (``fork``, ``vfork``,
``clone`` without ``CLONE_THREAD``) while threads still start: the process
cap that holds where no pids cgroup can be made. ``clone3`` answers
``ENOSYS`` (its flags sit behind a pointer a filter cannot read), so the C
library falls back to ``clone``, which the filter can check. A call made
through another ABI than the machine's (32-bit ``int 0x80`` on x86-64, the
x32 ABI) ends the process.

Why not libseccomp: its Python bindings load the system's ``libseccomp.so``,
which a machine may lack; the few dozen instructions here need nothing.
"""

from __future__ import annotations

import errno
import platform
import struct

# Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

# Return actions (linux/seccomp.h).
_RET_KILL_PROCESS = 0x80000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

# Offsets into struct seccomp_data: nr, arch, then args[6] as u64 (low half first here).
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

_CLONE_THREAD = 0x00010000
_CLONE_NEW_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x00000080  # CLONE_NEWTIME
)
_X32_BIT = 0x40000000

# (x86-64, aarch64) numbers; None where the call does not exist on that machine.
_SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "clone": (56, 220),
    "fork": (57, None),
    "vfork": (58, None),
    "clone3": (435, 435),
    "ptrace": (101, 117),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "iopl": (172, None),
    "ioperm": (173, None),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "acct": (163, 89),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "unshare": (272, 97),
    "setns": (308, 268),
    "perf_event_open": (298, 241),
    "fanotify_init": (300, 262),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424),
    "process_madvise": (440, 440),
    "mount_setattr": (442, 442),
    "lookup_dcookie": (212, 18),
    "syslog": (103, 116),
    "kcmp": (312, 272),
    "uselib": (134, None),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "adjtimex": (159, 171),
    "clock_adjtime": (305, 266),
    "vhangup": (153, 58),
    # Memory outside RLIMIT_AS: a memfd, a SysV segment or message queue (and semaphore sets)
    # hold kernel memory after the program lets go of it, and outlive the run's limits.
    "memfd_create": (319, 279),
    "shmget": (29, 194),
    "msgget": (68, 186),
    "semget": (64, 190),
    # Checked apart: their first argument, the address family, must be AF_UNIX.
    "socket": (41, 198),
    "socketpair": (53, 199),
}
_CHECKED = ("clone", "fork", "vfork", "clone3", "socket", "socketpair")
REFUSED = tuple(name for name in _SYSCALLS if name not in _CHECKED)
"""The calls refused outright (``clone``, ``fork``, ``vfork``, ``clone3``, ``socket`` and
``socketpair`` are checked apart)."""

SOCKET_FAMILIES = (1,)
"""The address families ``socket``/``socketpair`` may make: ``AF_UNIX`` only."""

_ARCHES = {"x86_64": (0, 0xC000003E), "amd64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}
_ARCHES["arm64"] = _ARCHES["aarch64"]


class UnsupportedMachine(RuntimeError):
    """No syscall table for this processor: the filter cannot be built."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(*, processes: bool, machine: str | None = None) -> bytes:
    """The filter as ``struct sock_filter`` records, ready for ``bwrap --seccomp FD``.

    ``processes``: whether the program may start processes (``fork``,
    ``clone`` without ``CLONE_THREAD``); threads are always allowed.
    """
    machine = (machine or platform.machine()).lower()
    if machine not in _ARCHES:
        raise UnsupportedMachine(f"no seccomp syscall table for {machine!r}")
    column, audit_arch = _ARCHES[machine]
    number = {name: nrs[column] for name, nrs in _SYSCALLS.items() if nrs[column] is not None}
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        _insn(_LD_W_ABS, _ARCH),
        _insn(_JEQ_K, audit_arch, 1, 0),
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, _NR),
    ]
    if column == 0:  # x86-64: the x32 ABI sets bit 30 of the number
        prog += [_insn(_JGE_K, _X32_BIT, 0, 1), _insn(_RET_K, _RET_KILL_PROCESS)]
    refused = list(REFUSED) if processes else [*REFUSED, "fork", "vfork"]
    for name in refused:
        if name in number:
            prog += [_insn(_JEQ_K, number[name], 0, 1), _insn(_RET_K, eperm)]
    prog += [_insn(_JEQ_K, number["clone3"], 0, 1), _insn(_RET_K, _RET_ERRNO | errno.ENOSYS)]
    # clone: the flags are the first argument on both machines (the low 32 bits hold them all).
    clone_block = [
        _insn(_LD_W_ABS, _ARG0_LOW),
        _insn(_JSET_K, _CLONE_NEW_FLAGS, 0, 1),
        _insn(_RET_K, eperm),
    ]
    if processes:
        clone_block.append(_insn(_RET_K, _RET_ALLOW))
    else:
        clone_block += [
            _insn(_JSET_K, _CLONE_THREAD, 0, 1),
            _insn(_RET_K, _RET_ALLOW),
            _insn(_RET_K, eperm),
        ]
    prog.append(_insn(_JEQ_K, number["clone"], 0, len(clone_block)))
    prog += clone_block
    # socket, socketpair: the family is the first argument, an int (its low 32 bits).
    socket_block = [_insn(_LD_W_ABS, _ARG0_LOW)]
    for family in SOCKET_FAMILIES:
        socket_block.append(_insn(_JEQ_K, family, 0, 1))
        socket_block.append(_insn(_RET_K, _RET_ALLOW))
    socket_block.append(_insn(_RET_K, _RET_ERRNO | errno.EAFNOSUPPORT))
    prog.append(_insn(_JEQ_K, number["socket"], 1, 0))
    prog.append(_insn(_JEQ_K, number["socketpair"], 0, len(socket_block)))
    prog += socket_block
    prog.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(prog)
