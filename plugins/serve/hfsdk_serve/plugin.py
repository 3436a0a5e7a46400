"""hfsdk serve's hook implementations."""

from __future__ import annotations

from typing import Any

import hfsdk


@hfsdk.hookimpl
def hfsdk_register_commands(cli: Any) -> None:
    """Add ``hfsdk serve``."""
    from hfsdk_serve.command import serve

    cli.add_command(serve)
