"""Print the planner's choices for 7B-70B models on 16-128 A100-80GB devices.

    .venv/bin/python benchmarks/placement_table.py > /tmp/table.md

One markdown table per algorithm (PPO, ReMax, Safe-RLHF) with the chosen
pools, the actor's layouts, the estimated iteration time, and the time of
colocating every role on all devices for comparison. docs/placement.md
quotes its output.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from hfsdk.core.errors import HfsdkError
from hfsdk_planner import PlacementSearch, Plan, algorithm_dataflow, get_cluster

ALGORITHMS = ("ppo", "remax", "safe_rlhf")
SIZES = ("7B", "13B", "34B", "70B")
DEVICES = (16, 32, 64, 96, 128)

SHORT = {"actor": "A", "critic": "C", "reference": "Ref", "reward": "RM", "cost": "Cost",
         "cost_critic": "CC"}  # fmt: skip


def _pools(plan: Plan) -> str:
    return " / ".join(
        f"{'+'.join(SHORT.get(r, r) for r in pool.roles)}: {pool.devices}" for pool in plan.pools
    )


def row(algo: str, size: str, devices: int) -> str:
    """One table row: the plan, or why there is none."""
    search = PlacementSearch(
        algorithm_dataflow(algo),
        size,
        get_cluster("a100-80gb").with_devices(devices),
        algorithm=algo,
    )
    try:
        plan = search.run()
    except HfsdkError:
        need = search.group_lower_bound(search.dataflow.roles)
        return f"| {size} | {devices} | does not fit (needs >= {need} devices) | | | | |"
    roles = search.dataflow.roles
    colocated = search.group_choice(tuple(roles), devices)
    if colocated is None:
        together, ratio = "does not fit", ""
    else:
        seconds = search.iteration_seconds([colocated.stage_seconds])
        together, ratio = f"{seconds:.1f}", f"{seconds / plan.iteration_seconds:.2f}x"
    actor = plan.role("actor")
    return (
        f"| {size} | {devices} | {_pools(plan)} | {actor.layout} / {actor.generation} | "
        f"{plan.iteration_seconds:.1f} | {together} | {ratio} |"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Print the tables."""
    # No options: the parser gives ``--help`` (which used to run the whole sweep) and
    # refuses stray arguments.
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0]
        + f" Algorithms {', '.join(ALGORITHMS)}; models {', '.join(SIZES)}; devices "
        + f"{', '.join(map(str, DEVICES))}. Takes no options; the tables go to stdout."
    )
    parser.parse_args(argv)
    for algo in ALGORITHMS:
        print(f"\n#### {algo}\n")
        print("| model | devices | pools (roles: devices) | actor train / rollout layout | "
              "iteration s | all colocated s | speed-up |")  # fmt: skip
        print("|---|---:|---|---|---:|---:|---:|")
        for size in SIZES:
            for devices in DEVICES:
                print(row(algo, size, devices))


if __name__ == "__main__":
    main()
