"""Colocated sync against a rollout pool of its own (one_step_off, async), same threads.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/async_vs_sync.py --steps 12

Two virtual devices with one intra-op thread each on both sides:

- ``sync``: colocated on both devices (actor and reference data-parallel over
  two ranks, generation on the actor's weights);
- ``one_step_off`` and ``async`` (``--max-staleness``, default 2, is passed to the
  async modes only): the actor and reference on one device, the rollout replica on the other
  (``placement.pools.rollout``), weights broadcast after every update, with the
  truncated-IS correction (``algorithm.is_correction: tis``);
- ``async_partial`` (``--modes``): ``async`` with partial rollouts in segments
  of 8 tokens (``trainer.partial_rollout_tokens``).

The workload is GRPO on the default task with ``rollout.max_response_length``
raised (default 48) and a hotter sampler (``--temperature``, default 2.0) so
that response lengths vary widely: sampled from the warm-started model at 2.0
they measured median 3, 90th percentile 7, longest 30 tokens (64 samples).
``--repeats`` runs the modes round-robin and prints medians (tokens/s, step
time, sync share) and means (rewards) over the repeats.
``--task compute`` trains ``compute_bound_task.py``'s ~30M model instead (every
response runs to the limit: no length variation, but the matrix
multiplications dominate a step). ``--task varied`` trains the same model
shape over a 32-word vocabulary (the task's words and a few fillers): EOS is
one word in 32, so the fresh model's responses end anywhere up to the limit
(a long tail) while the matrix multiplications still dominate.
Printed per mode: tokens/s (all tokens of
the steps after the first over their wall time), mean reward of the first
and second half of the steps, mean response length, and the weight sync's
transfer time (receive time minus the time the replica waited for the actor)
as a share of the step. Numbers vary with the machine's load: it prints the
load average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

MODES = {
    "sync": ["placement.pools.global.devices=2"],
    "one_step_off": [
        "placement.pools.global.devices=1",
        "placement.pools.rollout.devices=1",
        "trainer.pipeline=one_step_off",
        "algorithm.is_correction=tis",
    ],
    "async": [
        "placement.pools.global.devices=1",
        "placement.pools.rollout.devices=1",
        "trainer.pipeline=async",
        "algorithm.is_correction=tis",
    ],
    "async_partial": [
        "placement.pools.global.devices=1",
        "placement.pools.rollout.devices=1",
        "trainer.pipeline=async",
        "algorithm.is_correction=tis",
        "trainer.partial_rollout_tokens=8",
    ],
}
DEFAULT_MODES = ("sync", "one_step_off", "async")
VARIED_VOCABULARY = 32  # --task varied: EOS is one word in this many


def run(mode: str, args: argparse.Namespace, workdir: Path) -> list[dict]:
    """Train ``mode`` for ``args.steps`` steps in a fresh run directory; its metrics rows."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    overrides = [
        *MODES[mode],
        # Read only under trainer.pipeline=async (the config refuses it with another pipeline).
        *(
            [f"trainer.max_staleness={args.max_staleness}"]
            if "trainer.pipeline=async" in MODES[mode]
            else []
        ),
        f"trainer.total_steps={args.steps}",
        f"trainer.seed={args.seed}",
        "trainer.executor=ray",
        "trainer.worker_threads=1",
        "trainer.loggers=[jsonl]",
        "trainer.ray_allow_no_auth=true",
        f"rollout.max_response_length={args.max_response_length}",
        f"rollout.temperature={args.temperature}",
        f"data.batch_size={args.batch_size}",
        "actor.mini_batch_size=32",
        "actor.micro_batch_size=32",
    ]
    if args.task in ("compute", "varied"):  # a ~30M model: the matmuls dominate
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from compute_bound_task import ensure_compute_bound_assets

        from hfsdk_tasks import REWARD_FUNCTION_NAME

        vocab = {"compute": 4096, "varied": VARIED_VOCABULARY}[args.task]
        model_dir, train_jsonl = ensure_compute_bound_assets(
            args.cache / f"{args.task}_task", vocab_size=vocab
        )
        overrides += [
            f"actor.model_path={model_dir}",
            f"reference.model_path={model_dir}",
            f"data.train_files=[{train_jsonl}]",
            f"reward.functions=[{{name: {REWARD_FUNCTION_NAME}}}]",
        ]
    config = load_run_config("grpo", None, overrides)
    return Trainer(config, workdir / mode, quiet=True).fit()


def summary(rows: list[dict]) -> dict[str, float]:
    """Tokens/s after the first step, reward by half, length, and the sync's share of a step."""
    timed = rows[1:] or rows
    seconds = sum(r["timing/step_s"] for r in timed)
    tokens = sum(r["perf/throughput_tokens_per_s"] * r["timing/step_s"] for r in timed)
    half = len(rows) // 2
    transfer = [
        r["sync/receive_s"] - r["sync/rollout_wait_s"] for r in timed if "sync/receive_s" in r
    ]
    step_s = statistics.mean(r["timing/step_s"] for r in timed)
    return {
        "tokens_per_s": tokens / seconds if seconds else 0.0,
        "step_s": step_s,
        "reward_first": statistics.mean(r["reward/mean"] for r in rows[:half]),
        "reward_second": statistics.mean(r["reward/mean"] for r in rows[half:]),
        "length": statistics.mean(r["response_length/mean"] for r in rows),
        "sync_share": (statistics.mean(transfer) / step_s) if transfer else 0.0,
        "staleness_max": max(r.get("async/staleness_max", 0.0) for r in rows),
    }


def plot(runs: dict[str, list[dict]], path: Path) -> None:
    """Reward per step against the run's wall time (cumulative step time), one line per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for mode, rows in runs.items():
        clock, times = 0.0, []
        for row in rows:
            clock += row["timing/step_s"]
            times.append(clock)
        ax.plot(times, [r["reward/mean"] for r in rows], marker="o", label=mode)
    ax.set_xlabel("wall time of the steps (s)")
    ax.set_ylabel("reward/mean")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    """Run every mode and print the table (and each run's reward curve)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--max-response-length", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-staleness", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--task", choices=("default", "compute", "varied"), default="default",
        help="default: the default task, lengths vary; compute: compute_bound_task.py's "
        "~30M model, every response at full length; varied: that model over a 32-word "
        "vocabulary, lengths vary widely",
    )  # fmt: skip
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "hfsdk_bench")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--modes", default=",".join(DEFAULT_MODES), help=f"comma-separated, of {', '.join(MODES)}"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--plot", type=Path, default=None, help="reward vs wall time (PNG)")
    args = parser.parse_args()
    if args.steps < 2:
        # summary() averages the reward over each half of the steps; one step leaves a half empty.
        parser.error(
            f"--steps {args.steps} is too few: the summary compares the reward of the first "
            "and second half of the steps, so at least 2 are needed; pass --steps 2 or more"
        )
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    runs: dict[str, list[tuple[list[dict], dict[str, float]]]] = {}
    for repeat in range(args.repeats):
        for mode in args.modes.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                rows = run(mode, args, Path(tmp))
            runs.setdefault(mode, []).append((rows, summary(rows)))
            print(f"{mode} (repeat {repeat + 1}): {runs[mode][-1][1]}", file=sys.stderr)
    results = {}
    for mode, done in runs.items():
        merged = {}
        for key in done[0][1]:
            values = [s[key] for _, s in done]
            pick = statistics.mean if key.startswith("reward") else statistics.median
            merged[key] = pick(values)
        results[mode] = (done[0][0], merged)
    base = results.get("sync", (None, None))[1]
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min)")
    print(
        "| pipeline | tokens/s | vs sync | step s | reward (1st half) | reward (2nd half) "
        "| response length | weight sync share | staleness max |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, (_, s) in results.items():
        ratio = s["tokens_per_s"] / base["tokens_per_s"] if base else float("nan")
        print(
            f"| {mode} | {s['tokens_per_s']:.0f} | {ratio:.2f}x | {s['step_s']:.2f} "
            f"| {s['reward_first']:.3f} | {s['reward_second']:.3f} | {s['length']:.1f} "
            f"| {100 * s['sync_share']:.1f} % | {s['staleness_max']:.0f} |"
        )
    for mode, (rows, _) in results.items():
        curve = " ".join(f"{r['reward/mean']:.2f}" for r in rows)
        print(f"{mode} reward per step (run 1): {curve}")
    if args.plot is not None:
        plot({m: done[0][0] for m, done in runs.items()}, args.plot)
    if args.json is not None:
        every = {m: [rows for rows, _ in done] for m, done in runs.items()}
        args.json.write_text(json.dumps(every))


if __name__ == "__main__":
    main()
