"""kill -9 at several points, a full disk, a damaged newest checkpoint, a second writer.

One uninterrupted run is the reference. A second run directory then goes
through a chain of failures, each a real ``hfsdk run`` subprocess killed by
the fault-injection hook (``HFSDK_FAULT_INJECT``, SIGKILL: nothing flushed,
nothing cleaned up):

1. a full disk while writing the first checkpoint (one line, exit 2, nothing half-written),
2. kill -9 mid-checkpoint-write of step 2 (no checkpoint yet),
3. kill -9 half-way through writing step 3's metrics line,
4. kill -9 mid-checkpoint-write of step 4 (step 2's checkpoint exists),
5. a clean rerun, while a second run on the same directory is refused,

and must end identical to the reference: metrics lines 1..4 without gaps or
duplicates, same numbers, same final weights. Then the newest checkpoint is
damaged and a rerun falls back to the previous one, again ending identical.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hfsdk.core.trainer.tracking import read_metrics

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.heavy]

ARGS = ["--algo", "grpo", "--quiet", "trainer.total_steps=4", "trainer.save_every=2"]
COMPARED = ("reward/mean", "response_length/mean", "actor/pg_loss", "actor/kl", "actor/grad_norm")
HFSDK = str(Path(sys.executable).parent / "hfsdk")


def _env(fault: str | None) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HFSDK_FAULT_INJECT", None)
    env.pop("RAY_ADDRESS", None)
    if fault:
        env["HFSDK_FAULT_INJECT"] = fault
    return env


def _run(run_dir: Path, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HFSDK, "run", *ARGS, "--run-dir", str(run_dir)],
        env=_env(fault),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _weights(run_dir: Path, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(
        str(run_dir / "checkpoints" / f"step_{step}" / "actor_hf" / "model.safetensors")
    )


def _assert_same_run(reference: Path, other: Path) -> None:
    a, b = read_metrics(reference), read_metrics(other)
    assert [r["step"] for r in b] == [1, 2, 3, 4], [r["step"] for r in b]
    lines = [line for line in (other / "metrics.jsonl").read_text().splitlines() if line]
    assert len(lines) == 4  # no damaged or duplicate lines left in the file itself
    for x, y in zip(a, b, strict=True):
        for key in COMPARED:
            assert x[key] == pytest.approx(y[key], rel=1e-5, abs=1e-7), (x["step"], key)
    wa, wb = _weights(reference, 4), _weights(other, 4)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert (wa[name] - wb[name]).abs().max().item() < 1e-6, name


def _partial_dirs(run_dir: Path) -> list[str]:
    root = run_dir / "checkpoints"
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".")) if root.is_dir() else []


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    done = _run(run_dir)
    assert done.returncode == 0, done.stderr
    return run_dir


def test_kill_points_full_disk_and_a_second_writer(reference: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"

    # 1. disk full while writing step 2's checkpoint: one line, exit 2, nothing half-written
    full = _run(run_dir, "save_enospc:2")
    errors = [line for line in full.stderr.splitlines() if line.startswith("Error")]
    assert full.returncode == 2, full.stderr
    assert len(errors) == 1 and "no space left" in errors[0], full.stderr
    assert "Traceback" not in full.stderr
    assert _partial_dirs(run_dir) == [] and not (run_dir / "checkpoints" / "step_2").exists()
    assert [r["step"] for r in read_metrics(run_dir)] == [1, 2]

    # 2. kill -9 while step 2's checkpoint is being written (nothing published yet)
    killed = _run(run_dir, "save_mid:2")
    assert killed.returncode == -9, killed.stderr
    assert _partial_dirs(run_dir) and not (run_dir / "checkpoints" / "step_2").exists()

    # 3. kill -9 half-way through step 3's metrics line (step 2's checkpoint is now there)
    killed = _run(run_dir, "metrics_mid:3")
    assert killed.returncode == -9, killed.stderr
    assert (run_dir / "checkpoints" / "step_2" / "COMPLETE").exists()
    assert _partial_dirs(run_dir) == []  # the killed save of run 2 was cleaned up
    assert not (run_dir / "metrics.jsonl").read_text().endswith("\n")  # really half a line

    # 4. kill -9 while step 4's checkpoint is being written
    killed = _run(run_dir, "save_mid:4")
    assert killed.returncode == -9, killed.stderr
    assert [r["step"] for r in read_metrics(run_dir)] == [1, 2, 3, 4]  # 3, 4 are past step_2

    kept = read_metrics(run_dir)[:2]  # a resume from step_2 keeps these lines as they are

    # 5. a clean rerun; meanwhile a second run on the same directory is refused with our pid
    final = subprocess.Popen(
        # Ray workers: their start-up keeps this run going while the second one knocks.
        [HFSDK, "run", *ARGS, "trainer.executor=ray", "--run-dir", str(run_dir)],
        env=_env(None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lock = run_dir / ".lock"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and lock.read_text().strip() != str(final.pid):
        time.sleep(0.2)
    second = _run(run_dir)
    _, final_err = final.communicate(timeout=300)
    assert final.returncode == 0, final_err
    assert second.returncode == 2, second.stderr
    assert f"in use by another hfsdk run (pid {final.pid})" in second.stderr
    assert ".step_4.tmp" in final_err and read_metrics(run_dir)[:2] == kept
    assert _partial_dirs(run_dir) == []
    _assert_same_run(reference, run_dir)

    # 6. the newest checkpoint damaged (engine file truncated): warn, fall back to step_2
    engine = run_dir / "checkpoints" / "step_4" / "actor" / "actor_dcp" / "__0_0.distcp"
    with engine.open("r+b") as handle:
        handle.truncate(engine.stat().st_size // 2)
    fallback = _run(run_dir)
    assert fallback.returncode == 0, fallback.stderr
    warnings = [line for line in fallback.stderr.splitlines() if "unusable" in line]
    assert len(warnings) == 1 and "__0_0.distcp" in warnings[0], fallback.stderr
    assert "Traceback" not in fallback.stderr
    _assert_same_run(reference, run_dir)
