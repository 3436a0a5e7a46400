"""Logging: hfsdk's info lines show, other libraries' only from warning, a run log file, worker
lines with role and rank, and nothing through Python's last-resort handler."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from hfsdk.core import logs

SCRIPT = """
import logging, sys
from hfsdk.core import logs
{setup}
logging.getLogger("hfsdk.core.trainer.retention").info("pruned step_3")
logging.getLogger("hfsdk_backend_fsdp.engine").debug("a debug detail")
logging.getLogger("urllib3.connectionpool").info("library chatter")
logging.getLogger("urllib3.connectionpool").warning("library warning")
import warnings
warnings.warn("a python warning")
assert logging.lastResort is not None
"""


def _run(setup: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    full = {k: v for k, v in os.environ.items() if k not in (logs.LEVEL_ENV, logs.DIR_ENV)}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(setup=setup)],
        capture_output=True, text=True, env={**full, **(env or {})}, timeout=60,
    )  # fmt: skip


def test_info_lines_show_and_other_libraries_from_warning() -> None:
    done = _run("logs.configure_logging()")
    err = done.stderr.splitlines()
    assert "pruned step_3" in err
    assert "library warning" in err and "library chatter" not in done.stderr
    assert "a debug detail" not in done.stderr
    assert any("a python warning" in line for line in err)  # through logging, not printed raw


def test_log_level_debug_and_error() -> None:
    done = _run("logs.configure_logging('debug')")
    assert "a debug detail" in done.stderr and "library chatter" not in done.stderr
    done = _run("logs.configure_logging('error')")
    assert "pruned step_3" not in done.stderr and "library warning" not in done.stderr
    done = _run("logs.configure_logging()", {logs.LEVEL_ENV: "warning"})
    assert "pruned step_3" not in done.stderr and "library warning" in done.stderr


def test_a_bad_level_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from hfsdk.core.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["--log-level", "loud", "list"])
    assert info.value.code == 2
    with pytest.raises(Exception, match="--log-level 'loud': expected one of debug"):
        logs.parse_level("loud")


def test_a_bad_environment_level_is_named_and_an_explicit_flag_wins(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk.core.cli.main import main

    monkeypatch.setenv(logs.LEVEL_ENV, "verbose")
    with pytest.raises(SystemExit) as info:
        main(["list"])
    # Before: blamed on --log-level, and --log-level debug did not get past it.
    assert info.value.code == 2 and "HFSDK_LOG_LEVEL 'verbose': expected" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["--log-level", "debug", "list"])
    assert info.value.code in (0, None)


def test_run_log_file_and_worker_prefix(tmp_path: Path) -> None:
    setup = f"logs.configure_logging(); logs.attach_run_log({str(tmp_path)!r})"
    done = _run(setup)
    text = (tmp_path / logs.RUN_LOG).read_text()
    assert "INFO hfsdk.core.trainer.retention: pruned step_3" in text
    assert "library chatter" not in text
    # A worker process: every line names its role(s) and rank, and it has its own file.
    done = _run(
        "logs.configure_worker_logging('actor+reference', 3)",
        {logs.DIR_ENV: str(tmp_path), logs.LEVEL_ENV: "info"},
    )
    assert "[actor+reference rank 3] pruned step_3" in done.stderr.splitlines()
    worker = (tmp_path / "logs" / "actor+reference_rank3.log").read_text()
    assert "[actor+reference rank 3] hfsdk.core.trainer.retention: pruned step_3" in worker


def test_configuring_twice_prints_once(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        logs.configure_logging("info")
        logs.configure_logging("info")
        logging.getLogger("hfsdk.test").info("once")
        assert capsys.readouterr().err.count("once") == 1
    finally:
        for handler in list(root.handlers):
            if handler not in before:
                root.removeHandler(handler)


def test_a_full_disk_under_the_run_log_prints_no_traceback_per_line(tmp_path: Path) -> None:
    """Each record written to a full disk printed '--- Logging error ---' and a traceback; the
    run's own error (the metrics or checkpoint write) names the full disk once."""
    setup = f"""logs.configure_logging(); logs.attach_run_log({str(tmp_path)!r})
class Full:
    def write(self, text): raise OSError(28, "No space left on device")
    def flush(self): pass
for handler in logging.getLogger().handlers:
    if isinstance(handler, logging.FileHandler):
        handler.stream = Full()
"""
    done = _run(setup)
    assert done.returncode == 0, done.stderr
    assert "Logging error" not in done.stderr and "Traceback" not in done.stderr
