"""How far the planner's estimates are from measured runs, per stage, on this machine.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/planner_accuracy.py [--profile local.yaml]

Calibrates this machine (``hfsdk calibrate``; or reads ``--profile``), then
for the default task and the compute-bound task (``compute_bound_task.py``:
the ~30M Llama of ``vs_trl.py --task compute``), each with GRPO and PPO, at 1
and 2 devices, trains a few steps (``hfsdk run``, one process each, one
thread per device) and re-plans each run on the profile (``hfsdk plan
--check``): predicted against measured seconds per step and per stage
(generation, preparation, training, transition), medians over the steps after
the first; ``--recalibrate`` measures the device again right before and right after
each run and averages the two predictions. Goals: step within 25 %, each stage
within 40 %. Prints a markdown table (docs/placement.md keeps one) and, last, the
70B/128-GPU search time.

``--devices`` also takes ``1+1``: the actor (and the other roles) on one device and
one rollout replica on another (``placement.pools.rollout``) under
``trainer.pipeline: one_step_off`` with TIS, where the planner prices a step as
max(generation, the rest) + the weight sync. The step is what to compare there: the
measured generation stage is the time the step waited for its batch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGES = ("generation", "preparation", "training", "transition")


def compute_overrides(workdir: Path, algo: str, dtype: str) -> list[str]:
    """The compute-bound task: 8 prompts x 4 samples, 64-token responses, one update of 32."""
    sys.path.insert(0, str(HERE))
    from compute_bound_task import ensure_compute_bound_assets

    from hfsdk_tasks import REWARD_FUNCTION_NAME

    model_dir, train_jsonl = ensure_compute_bound_assets(workdir / "compute_task")
    out = [
        f"actor.model_path={model_dir}",
        f"reference.model_path={model_dir}",
        f"data.train_files=[{train_jsonl}]",
        f"reward.functions=[{{name: {REWARD_FUNCTION_NAME}}}]",
        "data.batch_size=8",
        "algorithm.n_samples_per_prompt=4",
        "rollout.max_response_length=64",
        "actor.mini_batch_size=32",
        "actor.micro_batch_size=32",
        "reference.forward_micro_batch_size=32",
        f"actor.dtype={dtype}",
        f"reference.dtype={dtype}",
    ]
    if algo == "ppo":
        out += [
            f"critic.model_path={model_dir}",
            "critic.mini_batch_size=32",
            "critic.micro_batch_size=32",
            f"critic.dtype={dtype}",
        ]
    return out


OVERLAPPED = "1+1"
"""The ``--devices`` entry for the actor's device plus a rollout replica's, one_step_off."""


def layout_overrides(devices: str, steps: int) -> list[str]:
    """One pool of ``devices``, or (``1+1``) a rollout pool of its own under one_step_off."""
    from hfsdk_planner.calibrate_backend import short_run_overrides

    if devices != OVERLAPPED:
        return short_run_overrides(steps, int(devices))
    return [
        *short_run_overrides(steps, 1),
        "placement.pools.rollout.devices=1",
        "trainer.pipeline=one_step_off",
        "algorithm.is_correction=tis",
        "trainer.executor=ray",
    ]


def train(algo: str, task: str, devices: str, steps: int, workdir: Path, dtype: str) -> Path:
    """One short run in its own process; its run directory."""
    from hfsdk_planner.calibrate_backend import train_in_subprocess

    overrides = layout_overrides(devices, steps)
    if task == "compute":
        overrides += compute_overrides(workdir, algo, dtype)
    run_dir = workdir / f"{task}-{algo}-{devices}"
    # A run directory left by an earlier pass would resume, not measure.
    shutil.rmtree(run_dir, ignore_errors=True)
    return train_in_subprocess(run_dir, algo, overrides)


def _remeasure(profile: str, path: Path) -> str:
    """``profile`` with the device measured again now (links, calls and backend kept)."""
    from hfsdk_planner.calibrate import calibrate
    from hfsdk_planner.cluster import Cluster

    fresh, _raw = calibrate(links_from=Cluster.load(profile))
    fresh.save(path)
    return str(path)


def _pct(row: object) -> str:
    predicted, measured = row.predicted, row.measured  # type: ignore[attr-defined]
    if predicted == 0 and measured < 2e-3:
        return "n/a"  # nothing to price (one device: no transition), a millisecond measured
    ratio = row.ratio  # type: ignore[attr-defined]
    return f"{(ratio - 1) * 100:+.0f}%" if ratio != float("inf") else "-"


def main() -> None:
    """Calibrate, run the grid, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="A cluster profile YAML (default: calibrate now).")
    parser.add_argument("--steps", type=int, default=4, help="Steps per run (first one skipped).")
    parser.add_argument("--tasks", default="default,compute")
    parser.add_argument("--algos", default="grpo,ppo")
    parser.add_argument("--devices", default="1,2", help=f"Device counts, or {OVERLAPPED!r}.")
    parser.add_argument("--dtype", default="float32", help="Compute dtype of the compute task.")
    parser.add_argument("--workdir", default=None)
    parser.add_argument(
        "--recalibrate",
        action="store_true",
        help="Re-measure the device (not links or calls) right before and right after each "
        "run and average the two predictions: on a shared machine the speed changes by the "
        "minute.",
    )
    parser.add_argument(
        "--statistic",
        default="median",
        choices=("mean", "median", "min"),
        help="Of the measured steps after the first (min: the best, like the calibration).",
    )
    args = parser.parse_args()

    from hfsdk_planner.cluster import Cluster
    from hfsdk_planner.run_plan import CheckRow, check_run

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="planner_accuracy_"))
    workdir.mkdir(parents=True, exist_ok=True)
    profile = args.profile
    if profile is None:
        from hfsdk_planner.calibrate import calibrate, format_calibration

        cluster, raw = calibrate()
        profile = str(workdir / "local.yaml")
        cluster.save(profile)
        print(format_calibration(cluster, raw), flush=True)
    print(f"profile: {profile} ({Cluster.load(profile).source})", flush=True)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    header = (
        "| task | algo | devices | step pred / meas s | step err | "
        + " | ".join(f"{s} pred / meas s (err)" for s in STAGES)
        + " |"
    )
    lines = [header, "|" + "---|" * (4 + len(STAGES)) + "---|"]
    for task in args.tasks.split(","):
        for algo in args.algos.split(","):
            for devices in args.devices.split(","):
                started = time.perf_counter()
                name = f"{task}-{algo}-{devices}"
                profiles = [profile]
                if args.recalibrate:
                    profiles = [_remeasure(profile, workdir / f"local-{name}-before.yaml")]
                run_dir = train(algo, task, devices, args.steps, workdir, args.dtype)
                if args.recalibrate:
                    profiles.append(_remeasure(profile, workdir / f"local-{name}-after.yaml"))
                tables = [check_run(run_dir, p, statistic=args.statistic)[1] for p in profiles]
                by = {
                    rows[0].name: CheckRow(
                        name=rows[0].name,
                        predicted=sum(r.predicted for r in rows) / len(rows),
                        measured=rows[0].measured,
                    )
                    for rows in zip(*tables, strict=True)
                }
                step = by["step"]
                cells = [
                    f"{by[s].predicted:.3f} / {by[s].measured:.3f} ({_pct(by[s])})" for s in STAGES
                ]
                line = (
                    f"| {task} | {algo} | {devices} | {step.predicted:.3f} / {step.measured:.3f} "
                    f"| {_pct(step)} | " + " | ".join(cells) + " |"
                )
                lines.append(line)
                load = os.getloadavg()[0]
                print(
                    f"{line}   ({time.perf_counter() - started:.0f} s, load {load:.1f})",
                    flush=True,
                )
    print()
    print("\n".join(lines))
    search = subprocess.run(
        [sys.executable, str(HERE / "placement_search.py")], capture_output=True, text=True
    )
    print()
    print(search.stdout.strip()[-1500:])


if __name__ == "__main__":
    main()
