"""The auto-mapping search: exact against brute force, feasible, cached, deterministic."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys

import attrs
import pytest

from hfsdk import Dataflow, HfsdkError, Stage
from hfsdk_planner import (
    Cluster,
    ModelSpec,
    PlacementSearch,
    Plan,
    Workload,
    get_cluster,
    resolve_model,
    search_placement,
    set_partitions,
)
from hfsdk_planner.memory_model import role_memory
from hfsdk_ppo.spec import PPO_SPEC
from hfsdk_remax.spec import REMAX_SPEC
from hfsdk_safe_rlhf.spec import SAFE_RLHF_SPEC

SMALL = Workload(batch_size=256)


def _cluster(devices: int, memory: float = 80e9, per_node: int = 8) -> Cluster:
    base = attrs.evolve(get_cluster("a100-80gb"), device_memory=memory, devices_per_node=per_node)
    return base.with_devices(devices)


def _brute_force(search: PlacementSearch) -> tuple[float, tuple, tuple] | None:
    """Every partition x every allocation (each group >= 1 device), first strict minimum."""
    total = search.cluster.num_devices
    best = None
    for partition in set_partitions(search.dataflow.roles):
        k = len(partition)
        for head in itertools.product(range(1, total + 1), repeat=k - 1):
            last = total - sum(head)
            if last < 1:
                continue
            alloc = (*head, last)
            choices = [search.group_choice(g, n) for g, n in zip(partition, alloc, strict=True)]
            if any(c is None for c in choices):
                continue
            value = search.iteration_seconds([c.stage_seconds for c in choices])
            if best is None or value < best[0]:
                best = (value, partition, alloc)
    return best


# A 1.3B model with 19 heads (the shape counts once got): no tensor parallelism divides
# it, which is what makes the split placements below win.
ODD_1_3B = ModelSpec(
    name="1.3B",
    num_params=1_300_000_000,
    num_layers=16,
    hidden_size=2432,
    num_heads=19,
    num_kv_heads=19,
    intermediate_size=6400,
    vocab_size=32000,
)

# (dataflow, models, cluster): the last four have a split (not all-colocated) optimum.
CASES = [
    (PPO_SPEC.dataflow, "7B", _cluster(8)),
    (REMAX_SPEC.dataflow, ODD_1_3B, _cluster(6, per_node=6)),
    (PPO_SPEC.dataflow, {"actor": "7B", "critic": ODD_1_3B, "reference": ODD_1_3B,
                             "reward": ODD_1_3B}, _cluster(12, memory=24e9, per_node=4)),
    (PPO_SPEC.dataflow, {"actor": "13B", "critic": "7B", "reference": ODD_1_3B,
                             "reward": ODD_1_3B}, _cluster(12, memory=40e9, per_node=4)),
    (SAFE_RLHF_SPEC.dataflow, {"actor": "7B", "critic": ODD_1_3B, "cost_critic": ODD_1_3B,
                                  "reference": ODD_1_3B, "reward": ODD_1_3B, "cost": ODD_1_3B},
     _cluster(12, memory=24e9, per_node=4)),
    (SAFE_RLHF_SPEC.dataflow, {"actor": "7B", "critic": ODD_1_3B, "cost_critic": ODD_1_3B,
                                  "reference": ODD_1_3B, "reward": ODD_1_3B, "cost": ODD_1_3B},
     _cluster(16, memory=60e9)),  # 60 GB: with 80 every role colocates
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_brute_force(case: int) -> None:
    dataflow, models, cluster = CASES[case]
    search = PlacementSearch(dataflow, models, cluster, SMALL)
    plan = search.run()
    value, partition, alloc = _brute_force(search)
    assert plan.iteration_seconds == value
    assert tuple(pool.roles for pool in plan.pools) == partition
    assert tuple(pool.devices for pool in plan.pools) == alloc
    # The branch and bound skipped most allocations but found the same optimum.
    assert plan.stats.subtrees_pruned > 0 or plan.stats.allocations_evaluated == 1


def test_brute_force_cases_include_split_placements() -> None:
    splits = 0
    for dataflow, models, cluster in CASES:
        splits += len(search_placement(dataflow, models, cluster, SMALL).pools) > 1
    assert splits >= 4  # the comparison is not only about colocating everything


def _check_feasible(plan: Plan, search: PlacementSearch) -> None:
    cluster = search.cluster
    assert sum(pool.devices for pool in plan.pools) == cluster.num_devices
    assert sorted(r for pool in plan.pools for r in pool.roles) == sorted(search.dataflow.roles)
    for pool in plan.pools:
        peaks = []
        for name in pool.roles:
            role = plan.role(name)
            task = search.tasks[name]
            layout = role.layout
            assert role.pool == pool.name
            assert layout.devices == pool.devices
            assert task.model.num_layers % layout.p == 0
            assert layout.t <= cluster.devices_per_node
            assert task.model.num_heads % layout.t == 0
            if task.generates:
                gen = role.generation
                assert gen is not None
                assert layout.model_parallel % gen.tg == 0
                assert gen.tg * gen.dg == pool.devices
            else:
                assert role.generation is None
            # Recompute the memory independently of the search's bookkeeping.
            peak = role_memory(task, layout, role.generation).peak
            assert math.isclose(peak, role.peak_memory_bytes)
            peaks.append(peak)
        assert sum(peaks) <= cluster.usable_memory
        assert math.isclose(sum(peaks), pool.peak_memory_bytes)


@pytest.mark.parametrize(
    ("dataflow", "size", "devices"),
    [
        (PPO_SPEC.dataflow, "7B", 16),
        (PPO_SPEC.dataflow, "13B", 32),
        (PPO_SPEC.dataflow, "34B", 64),
        (PPO_SPEC.dataflow, "70B", 128),
        (REMAX_SPEC.dataflow, "70B", 32),
        (SAFE_RLHF_SPEC.dataflow, "70B", 64),
        (SAFE_RLHF_SPEC.dataflow, "34B", 128),
    ],
)
def test_every_chosen_plan_fits_memory(dataflow: Dataflow, size: str, devices: int) -> None:
    search = PlacementSearch(dataflow, size, get_cluster("a100-80gb").with_devices(devices))
    plan = search.run()
    _check_feasible(plan, search)
    # The stage totals are the slowest pool's sum of its roles' seconds.
    for s in range(len(plan.stages)):
        per_pool = [sum(plan.role(r).stage_seconds[s] for r in pool.roles) for pool in plan.pools]
        assert math.isclose(plan.stage_seconds[s], max(per_pool))
    assert math.isclose(plan.iteration_seconds, sum(plan.stage_seconds))


def test_small_memory_cases_fit_too() -> None:
    for dataflow, models, cluster in CASES:
        search = PlacementSearch(dataflow, models, cluster, SMALL)
        _check_feasible(search.run(), search)


def _without_timing(plan: Plan) -> dict:
    data = plan.to_dict()
    data.pop("stats")
    return data


@pytest.mark.parametrize(
    ("dataflow", "size", "devices"),
    [(PPO_SPEC.dataflow, "70B", 128), (SAFE_RLHF_SPEC.dataflow, "13B", 32)],
)
def test_cache_changes_nothing_but_work(dataflow: Dataflow, size: str, devices: int) -> None:
    cluster = get_cluster("a100-80gb").with_devices(devices)
    cached = search_placement(dataflow, size, cluster, use_cache=True)
    uncached = search_placement(dataflow, size, cluster, use_cache=False)
    assert _without_timing(cached) == _without_timing(uncached)
    assert cached.stats.cache and not uncached.stats.cache
    assert uncached.stats.role_hits == 0
    assert cached.stats.role_hits > 0
    # Equal tasks (reference and reward of one size) share entries, groups repeat
    # across partitions: most lookups are hits.
    assert cached.stats.hit_rate > 0.5
    assert cached.stats.role_lookups < uncached.stats.role_lookups


def test_equal_role_tasks_share_cache_entries() -> None:
    search = PlacementSearch(PPO_SPEC.dataflow, "7B", _cluster(8), SMALL)
    assert search.tasks["reference"] == search.tasks["reward"]
    search.cache.get(search.tasks["reference"], 8)
    search.cache.get(search.tasks["reward"], 8)
    assert (search.cache.lookups, search.cache.hits) == (2, 1)


def test_deterministic() -> None:
    cluster = get_cluster("a100-80gb").with_devices(64)
    first = search_placement(SAFE_RLHF_SPEC.dataflow, "13B", cluster)
    for _ in range(2):
        again = search_placement(SAFE_RLHF_SPEC.dataflow, "13B", cluster)
        assert _without_timing(again) == _without_timing(first)


def test_ties_keep_the_earliest_partition() -> None:
    # reference and reward are interchangeable here; the plan must not flip between them.
    plans = {
        str(search_placement(PPO_SPEC.dataflow, "34B", _cluster(64)).to_placement_section())
        for _ in range(3)
    }
    assert len(plans) == 1


def test_more_devices_never_slower_for_colocated_everything() -> None:
    # Sanity of the simulator through the search: doubling devices helps a lot.
    small = search_placement(PPO_SPEC.dataflow, "13B", _cluster(32))
    large = search_placement(PPO_SPEC.dataflow, "13B", _cluster(64))
    assert large.iteration_seconds < 0.7 * small.iteration_seconds


def test_models_per_role() -> None:
    models = {"actor": "13B", "critic": "7B", "reference": "13B", "reward": "7B"}
    plan = search_placement(PPO_SPEC.dataflow, models, _cluster(16))
    assert {r.role: r.model for r in plan.roles} == models
    assert plan.role("critic").num_params == resolve_model("7B").num_params


# -- bad input ---------------------------------------------------------------------------
def test_infeasible_says_how_many_devices_are_needed() -> None:
    with pytest.raises(HfsdkError, match=r"at least 35 devices") as err:
        search_placement(PPO_SPEC.dataflow, "70B", _cluster(2))
    assert "70B" in str(err.value) and "2 x a100-80gb" in str(err.value)


def test_infeasible_layouts_are_explained() -> None:
    # Enough memory in total, but 7 devices split neither 40 layers nor 40 heads usefully.
    with pytest.raises(HfsdkError, match="no parallel layout fits"):
        search_placement(PPO_SPEC.dataflow, "13B", _cluster(7, per_node=7))


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ({"actor": "7B"}, "no model size for roles"),
        ({"actor": "7B", "critic": "7B", "reference": "7B", "reward": "7B", "judge": "7B"},
         "unknown roles"),
        ("7Q", "cannot understand model size"),
        ({"actor": "7B", "critic": "7B", "reference": "7B", "reward": -3}, "parameter count"),
    ],
)  # fmt: skip
def test_bad_models(models: object, message: str) -> None:
    with pytest.raises(HfsdkError, match=message):
        PlacementSearch(PPO_SPEC.dataflow, models, _cluster(8))


def test_bad_dataflow() -> None:
    with pytest.raises(HfsdkError, match="needs an algorithm's Dataflow"):
        PlacementSearch({"roles": ["actor"]}, "7B", _cluster(8))  # type: ignore[arg-type]
    idle = Dataflow(roles=("actor", "critic"), stages=(Stage(name="g", work=(("actor",
                    "generation"),)),))  # fmt: skip
    with pytest.raises(HfsdkError, match=r"\['critic'\] do no work"):
        PlacementSearch(idle, "7B", _cluster(8))
    with pytest.raises(HfsdkError, match="no roles"):
        PlacementSearch(Dataflow(roles=(), stages=()), "7B", _cluster(8))


def test_deterministic_across_hash_seeds() -> None:
    code = (
        "import json\n"
        "from hfsdk_planner import plan_for_algorithm\n"
        "d = plan_for_algorithm('safe_rlhf', model_size='34B', num_devices=96,\n"
        "                       cluster='a100-80gb').to_dict()\n"
        "d.pop('stats')\n"
        "print(json.dumps(d, sort_keys=True))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


@pytest.mark.parametrize("devices", [4, 8, 12, 16])
def test_colocated_layouts_are_the_fastest_combination_that_fits(devices: int) -> None:
    # Small devices make the roles compete for memory inside the group.
    search = PlacementSearch(
        PPO_SPEC.dataflow, "1.3B", _cluster(devices, memory=24e9, per_node=4), SMALL
    )
    roles = search.dataflow.roles
    fronts = [search.cache.get(search.tasks[r], devices) for r in roles]
    combos = [
        combo
        for combo in itertools.product(*fronts)
        if sum(c.peak_bytes for c in combo) <= search.cluster.usable_memory
    ]
    choice = search.group_choice(roles, devices)
    if not combos:
        assert choice is None
        return
    best = min(sum(c.total_seconds for c in combo) for combo in combos)
    assert choice is not None
    assert math.isclose(sum(c.total_seconds for c in choice.candidates), best)
    assert choice.peak_bytes <= search.cluster.usable_memory
    # Memory really binds here: each role's fastest layout together would not fit.
    if devices == 4:
        assert sum(front[0].peak_bytes for front in fronts) > search.cluster.usable_memory


def test_rank_rows_limit_a_roles_device_counts_to_divisors() -> None:
    # A trained role's devices are data-parallel ranks: each takes an equal share of a
    # mini-batch, so its pool's device count must divide the mini-batch's rows.
    from hfsdk_planner.auto import algorithm_dataflow, plan_for_algorithm

    cluster = get_cluster("a100-80gb").with_devices(5)
    dataflow = algorithm_dataflow("grpo")
    free = search_placement(dataflow, "1.3B", cluster, algorithm="grpo")
    assert any(p.devices == 5 for p in free.pools)  # what it picks unconstrained
    limited = search_placement(dataflow, "1.3B", cluster, algorithm="grpo", rank_rows={"actor": 32})
    planned = plan_for_algorithm(
        "grpo", model_size="1.3B", cluster=cluster, num_devices=5, rank_rows={"actor": 32}
    )
    assert planned.pools == limited.pools
    actor = next(p for p in limited.pools if "actor" in p.roles)
    assert 32 % actor.devices == 0
    with pytest.raises(HfsdkError, match="must divide them"):
        search_placement(
            dataflow, "1.3B", cluster, algorithm="grpo", rank_rows=dict.fromkeys(dataflow.roles, 7)
        )
