"""The ``sandbox`` section of a run config: how strongly model-written code is isolated."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk import help_field


@attrs.frozen(kw_only=True)
class SandboxConfig:
    """Isolation of the programs the ``python`` tool and the ``code_tests`` reward run.

    ``os`` (default): bubblewrap namespaces, a seccomp filter and a pids cgroup;
    where bubblewrap cannot start, model code is refused and the run says so
    in one line before the first step. ``process``: the weaker layers (a
    process, kernel limits, an empty network namespace and ``nobody`` where
    possible) — a program can read what the trainer's user can read.
    """

    isolation: Literal["os", "process"] = help_field(
        "How model-written code is isolated: 'os' (bubblewrap namespaces, seccomp, pids cgroup; "
        "refused where bubblewrap cannot start) or 'process' (weaker: see docs/agents.md).",
        resumable=True,
        default="os",
        validator=attrs.validators.in_(("os", "process")),
    )
