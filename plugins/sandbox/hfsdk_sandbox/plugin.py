"""Hook implementations of the sandbox plugin."""

from __future__ import annotations

from typing import Any

import hfsdk


@hfsdk.hookimpl
def hfsdk_register_commands(cli: Any) -> None:
    """Add ``hfsdk sandbox run``."""
    from hfsdk_sandbox.command import sandbox

    cli.add_command(sandbox)
