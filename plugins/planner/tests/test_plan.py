"""Plans serialise, load back and give the run config's placement section."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk.core.trainer.placement_config import PlacementConfig, PoolConfig
from hfsdk_planner import Plan, get_cluster, search_placement
from hfsdk_ppo.spec import PPO_SPEC


@pytest.fixture(scope="module")
def plan() -> Plan:
    return search_placement(
        PPO_SPEC.dataflow, "34B", get_cluster("a100-80gb").with_devices(64), algorithm="ppo"
    )


def test_round_trips(plan: Plan, tmp_path: Path) -> None:
    assert Plan.from_json(plan.to_json()) == plan
    assert Plan.from_yaml(plan.to_yaml()) == plan
    for name in ("plan.yaml", "plan.json"):
        plan.save(tmp_path / name)
        assert Plan.load(tmp_path / name) == plan
    assert (tmp_path / "plan.json").read_text().lstrip().startswith("{")


def test_placement_section_shape(plan: Plan) -> None:
    section = plan.to_placement_section()
    assert set(section) == {"pools", "roles"}
    assert set(section["roles"]) == set(PPO_SPEC.dataflow.roles)
    assert sum(pool["devices"] for pool in section["pools"].values()) == 64
    for pool in section["pools"].values():
        assert set(pool) <= {"devices", "nodes"} and isinstance(pool["devices"], int)
        # A pool wider than a node of 8 names its nodes, else the run puts it on one node.
        assert pool["devices"] // pool.get("nodes", 1) <= 8, pool
    assert set(section["roles"].values()) == set(section["pools"])
    assert plan.to_dict()["placement"] == section


def test_placement_section_is_a_valid_run_config_section(plan: Plan) -> None:
    section = plan.to_placement_section()
    config = PlacementConfig(
        pools={name: PoolConfig(**pool) for name, pool in section["pools"].items()},
        roles=section["roles"],
    )
    for role in PPO_SPEC.dataflow.roles:
        assert config.pools[config.pool_of(role)].devices == plan.pool_of(role).devices


def test_table_names_everything(plan: Plan) -> None:
    table = plan.format_table()
    for pool in plan.pools:
        assert pool.name in table
    for role in plan.roles:
        assert str(role.layout) in table
    assert f"{plan.iteration_seconds:.1f} s" in table
    assert "hit rate" in table


def test_lookups(plan: Plan) -> None:
    assert plan.role("actor").generation is not None
    assert plan.pool_of("actor").name == plan.role("actor").pool
    with pytest.raises(HfsdkError, match="no role 'judge'"):
        plan.role("judge")
    with pytest.raises(HfsdkError, match="no pool 'x'"):
        plan.pool("x")


def test_bad_plan_files() -> None:
    with pytest.raises(HfsdkError, match="not a plan written by hfsdk plan"):
        Plan.from_dict({"algorithm": "ppo"})
