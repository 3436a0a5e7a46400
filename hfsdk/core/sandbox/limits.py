"""The limits one sandboxed run gets (``code_tests`` reward and code tools take them as config)."""

from __future__ import annotations

import attrs

from hfsdk.core.config.help import help_field


@attrs.frozen(kw_only=True)
class SandboxLimits:
    """Wall-clock, CPU, memory and output limits of one sandboxed program.

    ``wall_s`` bounds the whole run (the process group is killed after it);
    ``cpu_s`` is the kernel's CPU-time limit; ``memory_mb`` the address-space
    limit; ``output_bytes`` the largest stdout (and stderr) the program may
    write — more is cut there and reported as ``output_limit``.
    """

    wall_s: float = help_field(
        "Wall-clock limit of one program run in seconds (its process group is killed after).",
        default=5.0,
        validator=attrs.validators.gt(0.0),
    )
    cpu_s: int = help_field(
        "CPU-time limit of one program run in seconds (RLIMIT_CPU).",
        default=5,
        validator=attrs.validators.ge(1),
    )
    memory_mb: int = help_field(
        "Address-space limit of one program run in MiB (RLIMIT_AS).",
        default=512,
        validator=attrs.validators.ge(64),
    )
    output_bytes: int = help_field(
        "Largest stdout/stderr a program may write (bytes); more is cut and reported.",
        default=65536,
        validator=attrs.validators.ge(1024),
    )
