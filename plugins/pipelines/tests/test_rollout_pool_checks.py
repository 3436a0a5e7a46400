"""The rollout pool's preflight check (``check_rollout_pool``): the policy never on the
replicas' pool, partial rollouts only under async with a pool of untensored replicas."""

from __future__ import annotations

from pathlib import Path

import pytest
from hfsdk_pipelines.pipeline import check_rollout_pool

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config


def test_a_rollout_pool_alone_leaves_the_roles_a_pool(tmp_path: Path) -> None:
    # Moved with the check from tests/core/trainer/test_placement_config.py.
    cfg = tmp_path / "c.yaml"
    cfg.write_text("placement:\n  pools:\n    rollout:\n      devices: 1\n")
    config = load_run_config("grpo", str(cfg), ["trainer.pipeline=one_step_off"])
    check_rollout_pool(config, "actor")  # not refused


def test_the_rollout_pool_never_receives_a_role_implicitly() -> None:
    overrides = [
        "placement.pools={rollout: {devices: 1}, train: {devices: 1}}",
        "trainer.pipeline=one_step_off",
    ]
    check_rollout_pool(load_run_config("grpo", None, overrides), "actor")
    # Placing the policy there by name is still refused, with what to do.
    named = load_run_config("grpo", None, [*overrides, "placement.roles.actor=rollout"])
    with pytest.raises(HfsdkError, match=r"set placement\.roles\.actor to another pool"):
        check_rollout_pool(named, "actor")


def test_tp_replicas_with_partial_rollouts_are_refused() -> None:
    config = load_run_config(
        "grpo", None, [
            "placement.pools.global.devices=1", "placement.pools.rollout.devices=2",
            "placement.pools.rollout.tp=2", "trainer.pipeline=async",
            "trainer.partial_rollout_tokens=2",
        ],
    )  # fmt: skip
    with pytest.raises(HfsdkError, match=r"partial_rollout_tokens=2 is not supported with"):
        check_rollout_pool(config, "actor")
    config = load_run_config(
        "grpo", None, [
            "placement.pools.global.devices=1", "placement.pools.rollout.devices=2",
            "placement.pools.rollout.pp=2", "trainer.pipeline=async",
            "trainer.partial_rollout_tokens=2",
        ],
    )  # fmt: skip
    with pytest.raises(HfsdkError, match=r"pipelined rollout replicas .*rollout.pp=2"):
        check_rollout_pool(config, "actor")
