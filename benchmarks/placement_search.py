"""Time the auto-mapping search (``hfsdk plan``) and report its cache hit rate.

Run on one core for the issue's target (70B, 128 devices, PPO under 10 s):

    taskset -c 0 .venv/bin/python benchmarks/placement_search.py

Prints one row per case, with the role cache on and off. Planner only: no
torch, no ray.
"""

from __future__ import annotations

import argparse
import time

from hfsdk_planner import plan_for_algorithm

CASES = (
    ("ppo", "70B", 128),
    ("remax", "70B", 128),
    ("safe_rlhf", "70B", 128),
    ("safe_rlhf", "7B", 128),
)


def main() -> None:
    """Run the cases and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs per case")
    args = parser.parse_args()
    header = (
        f"{'algorithm':<10} {'model':>5} {'devices':>7} {'cache':>5} {'best s':>8} "
        f"{'hit rate':>8} {'lookups':>8} {'allocs':>7} {'pruned':>7} {'iteration s':>11}"
    )
    print(header)
    print("-" * len(header))
    for algo, size, devices in CASES:
        for cache in (True, False):
            best = float("inf")
            plan = None
            for _ in range(args.repeats):
                started = time.perf_counter()
                plan = plan_for_algorithm(
                    algo,
                    model_size=size,
                    num_devices=devices,
                    cluster="a100-80gb",
                    use_cache=cache,
                )
                best = min(best, time.perf_counter() - started)
            assert plan is not None and plan.stats is not None
            stats = plan.stats
            print(
                f"{algo:<10} {size:>5} {devices:>7} {'on' if cache else 'off':>5} {best:>8.3f} "
                f"{stats.hit_rate:>8.1%} {stats.role_lookups:>8} "
                f"{stats.allocations_evaluated:>7} {stats.subtrees_pruned:>7} "
                f"{plan.iteration_seconds:>11.1f}"
            )


if __name__ == "__main__":
    main()
