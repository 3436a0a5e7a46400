"""How the CLI reports errors: one line and a status, a traceback only with --debug."""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.stopping import RunStopped

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1
EXIT_WORKER_FAILURE = 3
"""A worker process raised, died or timed out (not a bug in the controller)."""
_PATH_ERRNOS = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.EACCES, errno.EPERM,
                errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG}  # fmt: skip
"""Errors of a path the user gave (a file where a folder must be, no permission, disk full)."""


def _first_line(text: object) -> str:
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""


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
    except click.Abort as exc:
        # click turns any EOFError raised inside a command into Abort: name the real cause.
        cause = exc.__context__
        if isinstance(cause, EOFError):
            return _internal(cause, debug)
        # And any KeyboardInterrupt (Ctrl-C): the status a shell expects for SIGINT.
        click.echo("Interrupted." if isinstance(cause, KeyboardInterrupt) else "Aborted.", err=True)
        return 130 if isinstance(cause, KeyboardInterrupt) else EXIT_INTERNAL
    except RunStopped as exc:
        click.echo(str(exc), err=True)
        return exc.exit_code
    except HfsdkError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"Error: {_first_line(exc)}", err=True)
        return EXIT_BAD_INPUT
    except RuntimeError as exc:
        from hfsdk.core.workers.errors import WorkerError

        if not isinstance(exc, WorkerError):
            return _internal(exc, debug)
        # The worker's traceback is in the message after the first line: --debug shows it.
        if debug:
            traceback.print_exc()
        hint = "" if debug else " (rerun with --debug for the worker traceback)"
        click.echo(f"Error: worker failure: {_first_line(exc)}{hint}", err=True)
        return EXIT_WORKER_FAILURE
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # (a write to an open file: no path)
            why = f"no space left on the device ({exc.strerror}); free space or use a larger disk"
            click.echo(f"Error: {why}, then rerun the same command to resume", err=True)
            return EXIT_BAD_INPUT
        if exc.filename is None or exc.errno not in _PATH_ERRNOS:
            return _internal(exc, debug)
        if debug:
            traceback.print_exc()
        click.echo(f"Error: cannot use {exc.filename!r}: {exc.strerror}; give a file you can read "
                   "(an input), or a path whose folders exist or can be made and that you can "
                   "write (an output)", err=True)  # fmt: skip
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    except Exception as exc:
        return _internal(exc, debug)
    return 0


def _internal(exc: Exception, debug: bool) -> int:
    if debug:
        traceback.print_exc()
        return EXIT_INTERNAL
    click.echo(f"Error: {type(exc).__name__}: {_first_line(exc)} (internal error; rerun with "
               "--debug for the traceback and report it)", err=True)  # fmt: skip
    return EXIT_INTERNAL


def exit_with(code: int) -> None:
    """Flush and exit (kept separate so tests can call the entry without exiting)."""
    sys.stdout.flush()
    sys.exit(code)
