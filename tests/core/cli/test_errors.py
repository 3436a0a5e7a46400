"""How the CLI reports failures: worker failures, hidden EOFErrors and unusable paths are one
clear line."""

from __future__ import annotations

import errno
from pathlib import Path

import click
import pytest

from hfsdk.core.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_WORKER_FAILURE,
    run_reporting_errors,
)
from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.errors import WorkerDiedError, WorkerFailure, WorkerTimeoutError


def _report(exc: BaseException, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    def entry() -> None:
        raise exc

    code = run_reporting_errors(entry, list(argv))
    return code, capsys.readouterr().err


def test_a_killed_worker_is_a_worker_failure_not_an_internal_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    died = WorkerDiedError(
        "role 'actor' rank 1 (pid 42 on 10.0.0.2) died during method 'update_actor': "
        "the worker process was killed (SIGKILL)",
        role="actor",
        rank=1,
        method="update_actor",
        cause="SIGKILL",
    )
    code, err = _report(died, capsys)
    assert code == EXIT_WORKER_FAILURE
    assert err.count("\n") == 1 and "internal error" not in err
    assert "worker failure: role 'actor' rank 1 (pid 42 on 10.0.0.2) died" in err


def test_a_worker_traceback_needs_debug(capsys: pytest.CaptureFixture[str]) -> None:
    failure = WorkerFailure(
        role="critic",
        rank=0,
        method="compute_values",
        exc_type="ValueError",
        message="bad shape",
        traceback='Traceback (most recent call last):\n  File "w.py"\nValueError: bad shape\n',
        pid=7,
        node_ip="10.0.0.1",
    )
    code, err = _report(failure.to_error(), capsys)
    assert code == EXIT_WORKER_FAILURE and err.count("\n") == 1
    assert "compute_values' raised ValueError: bad shape" in err and "--debug" in err
    code, err = _report(failure.to_error(), capsys, "--debug")
    assert code == EXIT_WORKER_FAILURE and "w.py" in err


def test_a_frozen_worker_is_reported_with_its_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    late = WorkerTimeoutError(
        "role 'actor' method 'generate_sequences': ranks [1] did not finish within 600 s",
        role="actor",
        ranks=[1],
        method="generate_sequences",
    )
    code, err = _report(late, capsys)
    assert code == EXIT_WORKER_FAILURE and "ranks [1] did not finish within 600 s" in err


def test_an_eof_error_is_named_instead_of_aborted(capsys: pytest.CaptureFixture[str]) -> None:
    def entry() -> None:
        try:
            raise EOFError("Ran out of input")
        except EOFError:
            raise click.Abort() from None  # what click's main does with an EOFError

    code = run_reporting_errors(entry, [])
    err = capsys.readouterr().err
    assert code == EXIT_INTERNAL and "EOFError: Ran out of input" in err and "Aborted" not in err


def test_ctrl_c_inside_a_command_exits_130(capsys: pytest.CaptureFixture[str]) -> None:
    def entry() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise click.Abort() from None  # what click's main does with a KeyboardInterrupt

    # Before: "Aborted." and 1, the internal-error status.
    assert run_reporting_errors(entry, []) == 130
    assert capsys.readouterr().err.strip() == "Interrupted."


def test_user_errors_print_their_first_line_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _report(HfsdkError("bad thing; do this\nmore detail"), capsys)
    assert code == EXIT_BAD_INPUT and err == "Error: bad thing; do this\n"


def test_a_path_the_user_gave_that_cannot_be_written_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(OSError) as raised:  # what writing below a file raises
        (afile / "out").mkdir(parents=True)
    code, err = _report(raised.value, capsys)
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1 and "internal error" not in err
    assert f"cannot use {str(afile / 'out')!r}: Not a directory" in err


def test_an_input_that_cannot_be_read_is_told_to_be_readable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before: only "give a path whose folders exist ... that you can write", for a file to read.
    code, err = _report(PermissionError(errno.EACCES, "Permission denied", "rows.jsonl"), capsys)
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1
    assert "cannot use 'rows.jsonl': Permission denied; give a file you can read (an input)" in err


def test_other_os_errors_stay_internal(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _report(ConnectionResetError(104, "Connection reset by peer"), capsys)
    assert code == EXIT_INTERNAL and "internal error" in err
    code, err = _report(OSError(errno.EEXIST, "File exists"), capsys)  # no path named: ours
    assert code == EXIT_INTERNAL and "internal error" in err


def test_a_full_disk_under_an_open_file_is_one_line_not_an_internal_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A metrics.jsonl write or flush on a full disk names no path: it was an internal error."""
    code, err = _report(OSError(errno.ENOSPC, "No space left on device"), capsys)
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1 and "internal error" not in err
    assert err.startswith("Error: no space left on the device (No space left on device)")


def test_torch_s_short_write_on_a_full_disk_is_a_full_disk() -> None:
    """torch 2.13's zip writer raises 'unexpected pos' on a full disk, inside a worker: the
    run said 'worker failure' instead of the no-space line with the step to resume from."""
    from hfsdk.core.trainer.trainer import _is_no_space

    message = "save_checkpoint raised RuntimeError: [enforce fail at inline_container.cc:672] "
    assert _is_no_space(RuntimeError(message + ". unexpected pos 704 vs 598"))
    assert not _is_no_space(RuntimeError(message + ". some other failure"))
