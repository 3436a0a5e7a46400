"""SIGTERM / SIGINT stop a run with a checkpoint; the rerun ends exactly like an unbroken run.

Real ``hfsdk run`` subprocesses on the default task. The in-process chain
signals the controller from inside (``HFSDK_FAULT_INJECT``: the same signal a
scheduler sends, at a chosen point): SIGTERM at step 2, SIGINT at step 3, two
SIGTERMs in the middle of step 4's checkpoint write (abandoned, nothing
half-written), one SIGTERM there (the checkpoint completes; step 4 being the
last, the run has completed and exits 0). Ray runs are signalled from outside
once their first metrics line is there (SIGTERM to the driver; SIGINT to the
whole process group, as Ctrl-C does) and must leave no process behind. Each
rerun resumes; the final weights equal the unbroken run's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

ARGS = ["--algo", "grpo", "--quiet", "trainer.total_steps=4"]
HFSDK = str(Path(sys.executable).parent / "hfsdk")


def _env(fault: str | None = None) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HFSDK_FAULT_INJECT", None)
    env.pop("RAY_ADDRESS", None)
    if fault:
        env["HFSDK_FAULT_INJECT"] = fault
    return env


def _run(run_dir: Path, *extra: str, fault: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HFSDK, "run", *ARGS, *extra, "--run-dir", str(run_dir)],
        env=_env(fault),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _max_diff(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    wa, wb = (
        load_file(str(d / "checkpoints" / "step_4" / "actor_hf" / "model.safetensors"))
        for d in (a, b)
    )
    assert wa.keys() == wb.keys()
    return max((wa[k] - wb[k]).abs().max().item() for k in wa)


def _steps(run_dir: Path) -> list[int]:
    root = run_dir / "checkpoints"
    return sorted(int(p.name[5:]) for p in root.iterdir() if p.name.startswith("step_"))


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("stopped by")]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert re.search(r"SIG(TERM|INT) received: finishing step \d", done.stderr), done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    done = _run(run_dir)
    assert done.returncode == 0, done.stderr
    return run_dir


@pytest.mark.heavy  # five runs of a subprocess; the hung-reward stop below stays quick
def test_signals_in_process_stop_with_a_checkpoint_and_the_rerun_is_exact(
    reference: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    rerun = "rerun the same command to resume"

    stopped = _run(run_dir, fault="sigterm:2")
    assert stopped.returncode == 143, stopped.stderr
    assert (
        _last_line(stopped) == f"stopped by SIGTERM at step 2: checkpoint step_2 written; {rerun}"
    )
    assert _steps(run_dir) == [2]

    stopped = _run(run_dir, fault="sigint:3")
    assert stopped.returncode == 130, stopped.stderr
    assert _last_line(stopped) == f"stopped by SIGINT at step 3: checkpoint step_3 written; {rerun}"
    assert _steps(run_dir) == [2, 3]

    # Two signals while step 4's checkpoint is written: abandoned at once, nothing half-written.
    stopped = _run(run_dir, fault="save_sigterm_twice:4")
    assert stopped.returncode == 143, stopped.stderr
    line = _last_line(stopped)
    assert "during step 4 (a second SIGTERM)" in line and "newest checkpoint is step_3" in line
    assert _steps(run_dir) == [2, 3]
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".")]

    # One signal there: the checkpoint is finished first. Step 4 is the last, so the run is
    # complete and ends as usual (before: exit 143 and "rerun the same command to resume").
    done = _run(run_dir, fault="save_sigterm:4")
    assert done.returncode == 0, done.stderr
    assert "SIGTERM received: finishing step 4" in done.stderr, done.stderr
    assert "stopped by" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert _steps(run_dir) == [2, 3, 4]
    assert _max_diff(reference, run_dir) == 0.0


@pytest.mark.parametrize(
    ("signum", "whole_group"),
    [(signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["sigterm-to-the-driver", "ctrl-c-to-the-process-group"],
)
@pytest.mark.heavy
def test_a_signal_from_outside_stops_a_ray_run_without_orphans(
    reference: Path, tmp_path: Path, signum: int, whole_group: bool
) -> None:
    import psutil

    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [HFSDK, "run", *ARGS, "trainer.executor=ray", "--run-dir", str(run_dir)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job has
    )
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if metrics.exists() and metrics.read_text().count("\n") >= 1:
            break
        time.sleep(0.1)
    children = psutil.Process(process.pid).children(recursive=True)
    assert children  # Ray's processes and the workers
    if whole_group:  # Ctrl-C: every process of the job gets it, Ray's and the workers too
        os.killpg(process.pid, signum)
    else:  # a scheduler's kill of the job's main process
        process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, err
    line = [x for x in err.splitlines() if x.startswith("stopped by")]
    assert len(line) == 1 and "Traceback" not in err, err
    name = signal.Signals(signum).name
    match = re.fullmatch(
        rf"stopped by {name} at step (\d): checkpoint step_\1 written; rerun the same command "
        "to resume",
        line[0],
    )
    assert match, line
    _, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [p.cmdline()[:3] for p in alive]

    done = _run(run_dir, "trainer.executor=ray")
    assert done.returncode == 0, done.stderr
    assert _max_diff(reference, run_dir) == 0.0


@pytest.mark.heavy
def test_a_hung_reward_function_ends_the_run_with_one_line(tmp_path: Path) -> None:
    scorer = tmp_path / "hung_reward.py"
    scorer.write_text(
        "import time\n"
        "def score(prompts, responses):\n"
        "    time.sleep(3600)\n"
        "    return [0.0] * len(responses)\n"
    )
    started = time.monotonic()
    done = _run(
        tmp_path / "run",
        f"reward.functions=[{{name: '{scorer}:score'}}]",
        "reward.timeout_s=2",
    )
    assert time.monotonic() - started < 200
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"reward function '{scorer}:score' did not return within 2 s" in errors[0]
    assert "(reward.timeout_s) on a batch of" in errors[0]
