"""Planning for registered algorithms by name, and the pure-Python promise."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import hfsdk
from hfsdk import HfsdkError
from hfsdk_planner import algorithm_dataflow, auto_placement_section, plan_for_algorithm


@pytest.mark.parametrize("algo", ["ppo", "grpo", "remax", "safe_rlhf"])
def test_roles_come_from_the_registered_dataflow(algo: str) -> None:
    dataflow = hfsdk.get_registry("algorithms").get(algo).impl.dataflow
    assert algorithm_dataflow(algo) is dataflow
    plan = plan_for_algorithm(algo, model_size="7B", num_devices=16, cluster="a100-80gb")
    assert tuple(role.role for role in plan.roles) == dataflow.roles
    assert plan.stages == tuple(stage.name for stage in dataflow.stages)
    assert plan.algorithm == algo


def test_role_sizes_override_one_role() -> None:
    plan = plan_for_algorithm(
        "ppo", model_size="13B", role_sizes={"reward": "7B"}, num_devices=16, cluster="a100-80gb"
    )
    assert plan.role("reward").model == "7B"
    assert plan.role("critic").model == "13B"


def test_auto_placement_section() -> None:
    section = auto_placement_section("ppo", model_size="7B", num_devices=8, cluster="a100-80gb")
    assert sum(pool["devices"] for pool in section["pools"].values()) == 8
    assert set(section["roles"]) == {"actor", "critic", "reference", "reward"}
    # The actor's rollout tp for the 3D-HybridEngine: what the plan chose, dividing its t.
    plan = plan_for_algorithm("ppo", model_size="7B", num_devices=8, cluster="a100-80gb")
    actor = plan.role("actor")
    assert section["rollout_tp"] == {"actor": actor.generation.tg}
    assert actor.layout.t % actor.generation.tg == 0


def test_local_cluster_defaults_to_this_machine() -> None:
    plan = plan_for_algorithm("grpo", model_size="125M", cluster="local")
    assert plan.num_devices == len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"role_sizes": {"judge": "7B"}}, r"unknown roles \['judge'\]"),
        ({"num_devices": 12}, "multiple of 8"),
        ({"cluster": "tpu"}, "unknown cluster preset"),
    ],
)
def test_bad_requests(kwargs: dict, message: str) -> None:
    with pytest.raises(HfsdkError, match=message):
        plan_for_algorithm("ppo", **{"cluster": "a100-80gb", **kwargs})


def test_unknown_algorithm_suggests_the_closest() -> None:
    with pytest.raises(HfsdkError, match="did you mean 'ppo'"):
        plan_for_algorithm("ppx")


def test_planner_imports_neither_torch_nor_ray() -> None:
    code = (
        "import sys, json\n"
        "from hfsdk_planner import plan_for_algorithm\n"
        "plan_for_algorithm('ppo', model_size='7B', num_devices=8, cluster='a100-80gb')\n"
        "print(json.dumps(sorted(m for m in ('torch', 'ray', 'matplotlib') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_threads_on_a_gpu_preset_are_refused() -> None:
    # Threads per device price a CPU profile only; a GPU preset would ignore them silently.
    with pytest.raises(HfsdkError, match=r"threads=4 .*CPU profile.*'a100-80gb' is a gpu"):
        plan_for_algorithm("grpo", cluster="a100-80gb", threads=4)
