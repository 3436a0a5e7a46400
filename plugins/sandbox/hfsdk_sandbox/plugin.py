"""Hook implementations of the sandbox plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_commands(cli: Any) -> None:
    """Add ``hfsdk sandbox run``."""
    from hfsdk_sandbox.command import sandbox

    cli.add_command(sandbox)


@hfsdk.hookimpl
def hfsdk_register_config_sections(register: Register) -> None:
    """Register the ``sandbox`` section (``sandbox.isolation``: ``os`` or ``process``)."""
    from hfsdk_sandbox.sandbox_config import SandboxConfig

    register("sandbox", SandboxConfig)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``sandbox_notice``: set the run's isolation, and say once before the first
    step when its model code (the ``python`` tool, the ``code_tests`` reward) would be
    refused or weakly isolated."""
    from hfsdk_sandbox.preflight import sandbox_preflight

    register("sandbox_notice", sandbox_preflight)
