"""Where bubblewrap cannot start (simulated: a bwrap that does not exist), model code is
refused unless ``sandbox.isolation: process`` accepts the weaker layers, and it is said once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfsdk_sandbox import SandboxLimits, run_python, unavailable_line
from hfsdk_sandbox.bwrap import unavailable_reason
from hfsdk_sandbox.preflight import sandbox_notice
from hfsdk_sandbox.runner import ISOLATION_ENV

FAST = SandboxLimits(wall_s=3.0, cpu_s=2, memory_mb=256, output_bytes=4096)


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("HFSDK_SANDBOX_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv(ISOLATION_ENV, "os")
    unavailable_reason.cache_clear()
    yield
    unavailable_reason.cache_clear()  # the next caller probes the real machine again


def test_model_code_is_refused_without_bubblewrap(no_bwrap: None, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = run_python(f"open({str(marker)!r}, 'w')", limits=FAST)
    assert result.status == "refused" and result.returncode is None
    assert "bubblewrap cannot start" in result.reason
    assert not marker.exists()
    line = unavailable_line()
    assert line is not None and "\n" not in line and "will be refused" in line
    # Every way in: a run config, `hfsdk sandbox run`'s option, and the environment variable
    # (all `hfsdk reward score` takes).
    for said in (result.reason, line):
        assert "\n" not in said
        for way in (
            "sandbox.isolation: process",
            "--isolation process",
            f"{ISOLATION_ENV}=process",
        ):
            assert way in said, said


def test_process_isolation_runs_it_and_says_it_is_weaker(
    no_bwrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ISOLATION_ENV, "process")
    # Modules the guard has not loaded: the stdlib must stay readable after any user switch.
    result = run_python("import json, decimal\nprint(json.dumps(6 * 7))", limits=FAST)
    assert (result.status, result.stdout) == ("ok", "42\n"), result.stderr
    line = unavailable_line()
    assert line is not None and "\n" not in line and "weaker process isolation" in line


def test_the_notice_is_given_only_for_runs_that_execute_model_code(no_bwrap: None) -> None:
    assert sandbox_notice("os", ["add"], ["exact_match"]) is None
    assert "will be refused" in (sandbox_notice("os", ["python"], []) or "")
    assert "weaker" in (sandbox_notice("process", [], ["code_tests"]) or "")
    assert os.environ[ISOLATION_ENV] == "process"  # workers started from here inherit it


def test_the_cli_says_so_in_one_line_before_the_result(tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    program.write_text("print('ran')\n")
    env = {**os.environ, "HFSDK_SANDBOX_BWRAP": "/nonexistent/bwrap", ISOLATION_ENV: "os"}
    hfsdk = str(Path(sys.executable).with_name("hfsdk"))
    done = subprocess.run(
        [hfsdk, "sandbox", "run", str(program), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("sandbox: bubblewrap cannot start here")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "refused" and result["stdout"] == ""


@pytest.mark.parametrize("value", ["Process", "bwrap", " os"])
def test_an_unknown_isolation_value_is_a_clear_error(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk import HfsdkError
    from hfsdk_sandbox import isolation

    monkeypatch.setenv(ISOLATION_ENV, value)
    # It was run as `os` without a word: `Process` meant process and got refused.
    with pytest.raises(HfsdkError) as caught:
        isolation()
    said = str(caught.value)
    assert repr(value) in said and "'os'" in said and "'process'" in said, said
    with pytest.raises(HfsdkError):
        run_python("print(1)", limits=FAST)


def test_an_empty_isolation_value_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from hfsdk_sandbox import isolation

    monkeypatch.setenv(ISOLATION_ENV, "")
    assert isolation() == "os"


def test_the_reward_cli_names_an_unknown_isolation_in_one_line(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": "p", "response": "x", "ground_truth": "{}"}) + "\n")
    env = {**os.environ, ISOLATION_ENV: "Process"}
    hfsdk = str(Path(sys.executable).with_name("hfsdk"))
    done = subprocess.run(
        [hfsdk, "reward", "score", "code_tests", "--data", str(rows)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "'Process'" in done.stderr and ISOLATION_ENV in done.stderr, done.stderr


@pytest.mark.skipif(
    unavailable_reason() is not None, reason=f"bubblewrap cannot start: {unavailable_reason()}"
)
def test_a_parent_that_ignores_sigchld_still_finds_bubblewrap_at_once() -> None:
    # The launcher inherited SIG_IGN: its wait() blocked until every child was gone, the probe
    # timed out after 20 s, and "bubblewrap cannot start" (with the launcher's source) stuck.
    probe = (
        "import signal, time\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "from hfsdk_sandbox.bwrap import unavailable_reason\n"
        "started = time.monotonic()\n"
        "print(repr(unavailable_reason()), round(time.monotonic() - started, 1))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    reason, seconds = done.stdout.rsplit(" ", 1)
    assert reason == "None", done.stdout[:300]
    assert float(seconds) < 10, done.stdout[:300]
