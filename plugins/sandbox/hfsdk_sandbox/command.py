"""``hfsdk sandbox run``: run a program in the sandbox, exactly as model code is run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hfsdk import HfsdkError


@click.group()
def sandbox() -> None:
    """Run programs in the sandbox that runs model-written code."""


MAX_INPUT_BYTES = 64 << 20
"""The largest program or standard input the command reads (either is held in memory)."""


def _read_text(path: str, what: str) -> str:
    file = Path(path)
    if file.is_dir():
        raise HfsdkError(f"{what} {path!r} is a directory; expected a Python file")
    if file.exists() and not file.is_file():  # a FIFO blocks the open, /dev/zero never ends
        raise HfsdkError(f"{what} {path!r} is not a regular file; give a file")
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
        if len(data) > MAX_INPUT_BYTES:
            raise HfsdkError(f"{what} {path!r} is over {MAX_INPUT_BYTES >> 20} MiB; give less")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise HfsdkError(f"{what} {path!r} does not exist; give the path of a file") from None
    except UnicodeDecodeError:
        raise HfsdkError(f"{what} {path!r} is not UTF-8 text; expected source text") from None
    except OSError as exc:
        raise HfsdkError(f"{what} {path!r} cannot be read ({exc.strerror})") from None


@sandbox.command(name="run")
@click.argument("file", metavar="FILE")
@click.option("--stdin", "stdin_file", default=None, metavar="FILE", help="Standard input.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (last line).")
@click.option(
    "--limits",
    "preset",
    type=click.Choice(["code_tests", "python"]),
    default="code_tests",
    show_default=True,
    help="Start from the limits of the code_tests reward's default or of the python tool.",
)
@click.option("--wall-s", type=float, default=None, help="Wall-clock limit (default 5).")
@click.option("--cpu-s", type=int, default=None, help="CPU-time limit (default 5).")
@click.option("--memory-mb", type=int, default=None, help="Address-space limit (default 512).")
@click.option("--output-bytes", type=int, default=None, help="stdout/stderr cap (default 65536).")
@click.option(
    "--isolation",
    type=click.Choice(["os", "process"]),
    default=None,
    help="os: bubblewrap (default); process: the weaker layers, where bubblewrap cannot start.",
)
def run_command(
    file: str,
    stdin_file: str | None,
    as_json: bool,
    preset: str,
    wall_s: float | None,
    cpu_s: int | None,
    memory_mb: int | None,
    output_bytes: int | None,
    isolation: str | None,
) -> None:
    """Run FILE as the ``python`` tool and the ``code_tests`` reward run model code.

    Without --json: the program's stdout and stderr, then one line on stderr
    with the status. With --json the last stdout line is the result
    (status, returncode, stdout, stderr, seconds, reason). Either way the
    exit status is 0 when the program ran to the end and exited 0, else 1.
    It returns within the wall-clock limit plus the sandbox's start-up.

    \b
        hfsdk sandbox run solution.py --stdin case1.txt --json
    """
    from hfsdk_sandbox import SandboxLimits, run_python, set_isolation, unavailable_line

    code = _read_text(file, "program")
    stdin = _read_text(stdin_file, "--stdin file") if stdin_file else ""
    import attrs

    from hfsdk_sandbox.limits import PYTHON_TOOL_LIMITS

    base = PYTHON_TOOL_LIMITS if preset == "python" else SandboxLimits()
    given = {"wall_s": wall_s, "cpu_s": cpu_s, "memory_mb": memory_mb, "output_bytes": output_bytes}
    try:
        limits = attrs.evolve(base, **{k: v for k, v in given.items() if v is not None})
    except (TypeError, ValueError) as exc:
        raise HfsdkError(f"sandbox limits: {exc}") from None
    if isolation:
        set_isolation(isolation)  # type: ignore[arg-type]
    line = unavailable_line()
    if line:
        click.echo(line, err=True)
    result = run_python(code, stdin=stdin, limits=limits)
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        click.echo(f"sandbox: {result.reason} ({result.seconds:.2f} s)", err=True)
    if not result.ok:  # with --json too: a script may test the exit status alone
        raise click.exceptions.Exit(1)
