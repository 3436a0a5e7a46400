"""Does RL improve the built-in default task? `hfsdk run` for each algorithm, as a table.

Each algorithm trains exactly as ``hfsdk run --algo X`` does (the default
task and its preset, on Ray), one after another; the table shows the mean
reward (and cost) of the first and last five steps and the wall time of the
whole run, Ray start-up included. Extra ``key=value`` overrides apply to
every run, e.g.::

    .venv/bin/python benchmarks/default_task_learnability.py
    .venv/bin/python benchmarks/default_task_learnability.py --algo grpo trainer.seed=3
    .venv/bin/python benchmarks/default_task_learnability.py --algo ppo --seeds 0 1 2 3 4

With ``--seeds`` each algorithm runs once per seed (``trainer.seed``) and a
line per algorithm gives the gain's minimum, mean and maximum over them
(overrides go before ``--seeds``, which takes every number after it). To
see another CPU's float rounding (e.g. an AVX2-only machine), run it with
``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` and a fresh
``HFSDK_CACHE_DIR`` (the warm start is rebuilt with those kernels too).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

ALGOS = ("grpo", "ppo", "remax", "safe_rlhf")


def _mean(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if key in r]
    return sum(values) / len(values) if values else float("nan")


def _cell(rows: list[dict], key: str, width: int) -> str:
    """The mean of ``key`` over ``rows`` right-aligned in ``width``, or blanks where no
    row has it (only Safe-RLHF logs ``cost/mean``; ``nan`` there read as a failed run)."""
    if not any(key in r for r in rows):
        return " " * width
    return f"{_mean(rows, key):>{width}.3f}"


def main() -> None:
    """Train each chosen algorithm on the default task and print the summary table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="all", choices=(*ALGOS, "all"))
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="trainer.seed values")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. trainer.seed=1")
    args = parser.parse_args()
    algos = ALGOS if args.algo == "all" else (args.algo,)
    seeds: list[int | None] = list(args.seeds) if args.seeds else [None]
    header = (
        f"{'algorithm':<10} {'seed':>4} {'reward first 5':>14} {'reward last 5':>13} {'gain':>6} "
        f"{'cost first 5':>12} {'cost last 5':>11} {'wall s':>7}"
    )
    lines = [header, "-" * len(header)]
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for algo in algos:
            gains = []
            for seed in seeds:
                seeded = [f"trainer.seed={seed}"] if seed is not None else []
                overrides = [*args.overrides, *seeded]
                started = time.perf_counter()
                config = load_run_config(algo, None, overrides)
                rows = Trainer(config, Path(tmp) / f"{algo}-{seed}", quiet=True).fit()
                wall = time.perf_counter() - started
                first, last = rows[:5], rows[-5:]
                gain = _mean(last, "reward/mean") - _mean(first, "reward/mean")
                gains.append(gain)
                lines.append(
                    f"{algo:<10} {config.trainer.seed:>4} {_mean(first, 'reward/mean'):>14.3f} "
                    f"{_mean(last, 'reward/mean'):>13.3f} {gain:>+6.3f} "
                    f"{_cell(first, 'cost/mean', 12)} {_cell(last, 'cost/mean', 11)} "
                    f"{wall:>7.1f}"
                )
                print(lines[-1], flush=True)
            if len(gains) > 1:
                summary.append(
                    f"{algo}: gain over {len(gains)} seeds min {min(gains):+.3f} "
                    f"mean {sum(gains) / len(gains):+.3f} max {max(gains):+.3f}"
                )
    print("\n".join([*lines, *summary]))


if __name__ == "__main__":
    main()
