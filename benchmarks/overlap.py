"""Overlapping independent stages: PPO with the critic on its own pool, stages side by side or not.

    .venv/bin/python benchmarks/overlap.py [--steps 3] [--task compute|default]

PPO's old log-probs (actor), reference log-probs (reference) and values
(critic) read only the generated samples. ``Algorithm.rollout`` dispatches all
three before waiting on any (``Algorithm.concurrently``), so with the critic
on its own pool its pass runs while the actor's pool computes the two
log-prob passes. The script trains the same run twice in child processes,
one after the other: ``overlap`` (hfsdk as it is) and ``sequential`` (the
same program with ``concurrently`` replaced by one blocking call after
another, which is what every algorithm did before), and prints per-stage
seconds (median over steps 2+) and the log-prob phase's wall time.

Placement: two pools of one device each, ``actor_pool`` (actor, reference)
and ``critic_pool`` (critic); on a CPU machine every worker gets one thread
(``trainer.worker_threads: auto``: cores / device slots).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STAGES = ("generation", "old_log_prob", "ref_log_prob", "values", "update_critic", "update_actor")


def overrides(task: str, steps: int, workdir: Path) -> list[str]:
    """The run's config: PPO, two one-device pools, the task's model for every role."""
    out = [
        f"trainer.total_steps={steps}",
        "trainer.loggers=[jsonl]",
        "trainer.val_every=0",
        "trainer.save_every=0",
        "data.batch_size=8",
        "algorithm.n_samples_per_prompt=1",
        "actor.mini_batch_size=4",  # two mini-batches: the old log-probs are needed
        "placement.pools={actor_pool: {devices: 1}, critic_pool: {devices: 1}}",
        "placement.roles={actor: actor_pool, reference: actor_pool, critic: critic_pool}",
    ]
    if task == "compute":
        sys.path.insert(0, str(HERE))
        from compute_bound_task import ensure_compute_bound_assets

        from hfsdk_tasks import REWARD_FUNCTION_NAME

        model_dir, train_jsonl = ensure_compute_bound_assets(workdir / "compute_task")
        out += [
            f"actor.model_path={model_dir}",
            f"reference.model_path={model_dir}",
            f"critic.model_path={model_dir}",
            f"data.train_files=[{train_jsonl}]",
            f"reward.functions=[{{name: {REWARD_FUNCTION_NAME}}}]",
            "rollout.max_response_length=32",
        ]
    return out


def sequential_concurrently(self: Any, batch: Any, calls: Any) -> list[Any]:
    """The pre-overlap program: each stage a blocking call, timed on its own."""
    results = []
    for name, method in calls:
        with self.stage(name):
            results.append(method(batch))
    return results


def child(mode: str, task: str, steps: int, workdir: Path) -> None:
    """Train once and write the per-step timings to ``<workdir>/<mode>.json``."""
    from hfsdk.core.algorithm import Algorithm
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    if mode == "sequential":
        Algorithm.concurrently = sequential_concurrently  # type: ignore[method-assign]
    config = load_run_config("ppo", None, overrides(task, steps, workdir))
    metrics = Trainer(config, workdir / f"run_{mode}", quiet=True).fit()
    (workdir / f"{mode}.json").write_text(json.dumps(metrics))


def median(values: list[float]) -> float:
    """Median of steps 2+ (step 1 warms up), or of all when there is one."""
    return statistics.median(values[1:] or values)


def table(results: dict[str, list[dict[str, float]]]) -> str:
    """Per-stage seconds per mode, and the log-prob phase's wall time."""
    lines = [
        "| mode | " + " | ".join(STAGES) + " | log-prob phase wall | step |",
        "|---|" + "---:|" * (len(STAGES) + 2),
    ]
    for mode, steps in results.items():
        cells = [median([m.get(f"timing/{s}_s", 0.0) for m in steps]) for s in STAGES]
        phase = median(
            [
                m["timing/step_s"]
                - sum(
                    m.get(f"timing/{s}_s", 0.0)
                    for s in ("generation", "reward", "advantages", "update_critic", "update_actor")
                )
                for m in steps
            ]
        )
        step = median([m["timing/step_s"] for m in steps])
        lines.append(
            f"| {mode} | "
            + " | ".join(f"{c:.2f}" for c in cells)
            + f" | {phase:.2f} | {step:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Run both modes one after the other and print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--task", choices=("compute", "default"), default="compute")
    p.add_argument("--mode", choices=("overlap", "sequential"), help=argparse.SUPPRESS)
    p.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.mode:
        child(args.mode, args.task, args.steps, args.workdir)
        return
    with tempfile.TemporaryDirectory(prefix="hfsdk_overlap_") as tmp:
        workdir = Path(tmp)
        results = {}
        for mode in ("sequential", "overlap"):
            print(f"{mode} ...", flush=True)
            subprocess.run(
                [
                    *(sys.executable, __file__, "--mode", mode, "--task", args.task),
                    *("--steps", str(args.steps), "--workdir", str(workdir)),
                ],
                check=True,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
            results[mode] = json.loads((workdir / f"{mode}.json").read_text())
    print(f"\nPPO, {args.task} task, {args.steps} steps, load average {os.getloadavg()[0]:.1f}\n")
    print(table(results))


if __name__ == "__main__":
    main()
