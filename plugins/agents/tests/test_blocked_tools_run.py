"""A ``--task tool_use`` run whose ``add`` tool blocks: it finishes its steps, and a stop
signal ends it within the grace with a checkpoint, even when the tool's deadline is past
the grace (each run bounded: it used to hang)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hfsdk.core.trainer.checkpoint import complete_checkpoints

pytestmark = pytest.mark.slow

BLOCKING_ADD = '''
import pathlib
import time


async def add(a: int, b: int) -> int:
    """Add two integers (but block the event loop first, forever)."""
    pathlib.Path(__file__).with_suffix(".called").touch()
    time.sleep(10_000)
    return a + b
'''


def _start(tmp_path: Path, *overrides: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    tool = tmp_path / "blocking.py"
    tool.write_text(BLOCKING_ADD)
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-c", "import sys; from hfsdk.core.cli.main import main; main(sys.argv[1:])", "run", "--algo", "grpo",
        "--task", "tool_use", "--run-dir", str(run_dir), "--quiet",
        f"rollout.multi_turn.tools=[{tool}:add]",
        "rollout.multi_turn.tool_timeout_s=0.5",
        "rollout.multi_turn.max_turns=2",
        "data.batch_size=4",
        *overrides,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    return process, run_dir, tool.with_suffix(".called")


def _finish(process: subprocess.Popen[bytes], limit_s: float) -> tuple[int, str]:
    try:
        _, err = process.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"the run did not end within {limit_s} s:\n{err.decode()[-3000:]}")
    return process.returncode, err.decode()


@pytest.mark.heavy  # a whole run; test_tool_worker checks a blocking tool's timeout and kill
def test_a_blocking_async_add_tool_fails_its_calls_and_the_run_finishes(tmp_path: Path) -> None:
    process, run_dir, called = _start(tmp_path, "trainer.total_steps=2")
    code, err = _finish(process, 600)
    assert code == 0, err[-3000:]
    assert called.exists(), "the tool was never called"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        # Every call timed out (a failed call), none succeeded, and the steps went on.
        assert row["agent/tool_calls_per_trajectory"] > 0
        assert row["agent/tool_errors_per_trajectory"] == row["agent/tool_calls_per_trajectory"]
        assert row["agent/tool_call_success"] == 0.0


@pytest.mark.parametrize(
    ("signum", "exit_code"),
    # SIGTERM is the same path as SIGINT with another exit code: heavy
    [pytest.param(signal.SIGTERM, 143, marks=pytest.mark.heavy), (signal.SIGINT, 130)],
)
def test_a_stop_signal_while_a_tool_blocks_ends_the_run_with_a_checkpoint(
    tmp_path: Path, signum: int, exit_code: int
) -> None:
    grace_s = 60.0  # the tool blocks far longer; a loaded CI machine needs a margin
    process, run_dir, called = _start(
        tmp_path,
        "trainer.total_steps=50",
        f"trainer.stop_grace_s={grace_s:g}",
        "rollout.multi_turn.tool_timeout_s=1000",  # the tool blocks well past the grace
    )
    deadline = time.monotonic() + 600
    while not called.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert called.exists(), "the tool was never called"
    sent = time.monotonic()
    process.send_signal(signum)
    code, err = _finish(process, grace_s + 60)
    took = time.monotonic() - sent
    assert code == exit_code, err[-3000:]
    assert took < grace_s + 30, took  # within the grace, plus tearing down
    # The blocked calls were cut short, so the step finished and its checkpoint was written.
    steps = [step for step, _ in complete_checkpoints(run_dir)]
    assert steps, f"no checkpoint was written: {err[-2000:]}"
    assert f"at step {steps[-1]}: checkpoint step_{steps[-1]} written" in err, err[-2000:]
