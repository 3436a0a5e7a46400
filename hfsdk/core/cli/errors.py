"""How the CLI reports errors: one line and a status, a traceback only with --debug."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from hfsdk.core.errors import HfsdkError

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1


def debug_requested(argv: list[str]) -> bool:
    """``--debug`` anywhere on the command line, or ``HFSDK_DEBUG=1``."""
    env = os.environ.get("HFSDK_DEBUG", "").strip().lower()
    return "--debug" in argv or env not in ("", "0", "false", "no")


def run_reporting_errors(entry: Callable[[], Any], argv: list[str]) -> int:
    """Call ``entry`` and turn exceptions into a message and an exit status."""
    debug = debug_requested(argv)
    try:
        entry()
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_INTERNAL
    except HfsdkError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"Error: {exc}", err=True)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    except Exception as exc:
        if debug:
            traceback.print_exc()
            return EXIT_INTERNAL
        click.echo(
            f"Error: {type(exc).__name__}: {exc} (internal error; rerun with --debug for the "
            "traceback and report it)",
            err=True,
        )
        return EXIT_INTERNAL
    return 0


def exit_with(code: int) -> None:
    """Flush and exit (kept separate so tests can call the entry without exiting)."""
    sys.stdout.flush()
    sys.exit(code)
