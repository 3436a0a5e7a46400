"""The limits one sandboxed run gets (``code_tests`` reward and code tools take them as config)."""

from __future__ import annotations

import attrs

from hfsdk import help_field


def _whole(instance: object, attribute: attrs.Attribute, value: object) -> None:
    """An int, not a float or bool: the guard passes it to ``int()`` and the kernel limits.

    ``cpu_s=5.0`` or ``memory_mb=True`` was accepted here, then every run failed.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"SandboxLimits.{attribute.name} must be an integer, got {value!r}")


@attrs.frozen(kw_only=True)
class SandboxLimits:
    """Wall-clock, CPU, memory and output limits of one sandboxed program.

    ``wall_s`` bounds the whole run (the process group is killed after it);
    ``cpu_s`` is the kernel's CPU-time limit; ``memory_mb`` the address-space
    limit; ``output_bytes`` the largest stdout (and stderr) the program may
    write — more is cut there and reported as ``output_limit``; ``max_tasks``
    the processes and threads it may have at once (a pids cgroup, where one can
    be made); ``scratch_mb`` the size of its working directory (a tmpfs).
    """

    wall_s: float = help_field(
        "Wall-clock limit of one program run in seconds (its process group is killed after).",
        default=5.0,
        # A day at most: an inf or 1e300 s deadline overflowed the timers that enforce it.
        validator=[attrs.validators.gt(0.0), attrs.validators.le(86400.0)],
    )
    cpu_s: int = help_field(
        "CPU-time limit of one program run in seconds (RLIMIT_CPU).",
        default=5,
        # A day at most, as wall_s: 2**63 s overflowed the C long that setrlimit takes.
        validator=[_whole, attrs.validators.ge(1), attrs.validators.le(86400)],
    )
    memory_mb: int = help_field(
        "Address-space limit of one program run in MiB (RLIMIT_AS).",
        default=512,
        # 1 TiB at most: 2**50 MiB in bytes overflowed the C long that setrlimit takes.
        validator=[_whole, attrs.validators.ge(64), attrs.validators.le(1 << 20)],
    )
    output_bytes: int = help_field(
        "Largest stdout/stderr a program may write (bytes); more is cut and reported.",
        default=65536,
        validator=[_whole, attrs.validators.ge(1024)],
    )
    max_tasks: int = help_field(
        "Tasks (threads and the launcher's processes) one program may have at once "
        "(cgroup pids.max, where one can be made).",
        default=32,
        validator=[_whole, attrs.validators.ge(4)],
    )
    scratch_mb: int = help_field(
        "Size of the program's working directory in MiB (a tmpfs under bubblewrap).",
        default=64,
        # 1 TiB at most: 2**45 MiB in bytes overflowed bubblewrap's --size.
        validator=[_whole, attrs.validators.ge(1), attrs.validators.le(1 << 20)],
    )


# The environment every sandboxed program gets (bubblewrap's --setenv, process mode's env).
# glibc gives each thread that allocates its own malloc arena, reserving 64 MiB of address space
# apiece, which RLIMIT_AS (memory_mb) counts: under the default 512 MiB only ~14 threads started
# ("can't start new thread"). Two arenas keep the reservation small whatever the thread count.
CHILD_ENV: dict[str, str] = {"MALLOC_ARENA_MAX": "2"}

PYTHON_TOOL_LIMITS = SandboxLimits(wall_s=5.0, cpu_s=5, memory_mb=512, output_bytes=8192)
"""The limits of one call of the agents' ``python`` tool (``hfsdk sandbox run --limits python``)."""
