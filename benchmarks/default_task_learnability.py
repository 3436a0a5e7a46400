"""Does RL improve the built-in default task? `hfsdk run` for each algorithm, as a table.

Each algorithm trains exactly as ``hfsdk run --algo X`` does (the default
task and its preset, on Ray), one after another; the table shows the mean
reward (and cost) of the first and last five steps and the wall time of the
whole run, Ray start-up included. Extra ``key=value`` overrides apply to
every run, e.g.::

    .venv/bin/python benchmarks/default_task_learnability.py
    .venv/bin/python benchmarks/default_task_learnability.py --algo grpo trainer.seed=3
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


def main() -> None:
    """Train each chosen algorithm on the default task and print the summary table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="all", choices=(*ALGOS, "all"))
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. trainer.seed=1")
    args = parser.parse_args()
    algos = ALGOS if args.algo == "all" else (args.algo,)
    header = (
        f"{'algorithm':<10} {'reward first 5':>14} {'reward last 5':>13} {'gain':>6} "
        f"{'cost first 5':>12} {'cost last 5':>11} {'wall s':>7}"
    )
    lines = [header, "-" * len(header)]
    with tempfile.TemporaryDirectory() as tmp:
        for algo in algos:
            started = time.perf_counter()
            config = load_run_config(algo, None, args.overrides)
            rows = Trainer(config, Path(tmp) / algo, quiet=True).fit()
            wall = time.perf_counter() - started
            first, last = rows[:5], rows[-5:]
            gain = _mean(last, "reward/mean") - _mean(first, "reward/mean")
            lines.append(
                f"{algo:<10} {_mean(first, 'reward/mean'):>14.3f} "
                f"{_mean(last, 'reward/mean'):>13.3f} {gain:>+6.3f} "
                f"{_mean(first, 'cost/mean'):>12.3f} {_mean(last, 'cost/mean'):>11.3f} "
                f"{wall:>7.1f}"
            )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
