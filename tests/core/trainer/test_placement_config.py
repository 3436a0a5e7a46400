"""Placement config: which pool a role runs on when the config does not say."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.pipeline import check_rollout_pool


def test_a_rollout_pool_alone_leaves_the_roles_a_pool(tmp_path: Path) -> None:
    # The natural first try, in a config file: only the rollout replicas' pool.
    cfg = tmp_path / "c.yaml"
    cfg.write_text("placement:\n  pools:\n    rollout:\n      devices: 1\n")
    config = load_run_config("grpo", str(cfg), ["trainer.pipeline=one_step_off"])
    assert list(config.placement.pools) == ["global", "rollout"]
    assert config.placement.pool_of("actor") == "global"
    check_rollout_pool(config, "actor")  # not refused


def test_the_rollout_pool_never_receives_a_role_implicitly() -> None:
    overrides = [
        "placement.pools={rollout: {devices: 1}, train: {devices: 1}}",
        "trainer.pipeline=one_step_off",
    ]
    config = load_run_config("grpo", None, overrides)
    assert list(config.placement.pools) == ["rollout", "train"]  # rollout listed first
    for role in ("actor", "reference"):
        assert config.placement.pool_of(role) == "train"
    check_rollout_pool(config, "actor")
    # Placing the policy there by name is still refused, with what to do.
    named = load_run_config("grpo", None, [*overrides, "placement.roles.actor=rollout"])
    with pytest.raises(HfsdkError, match=r"set placement\.roles\.actor to another pool"):
        check_rollout_pool(named, "actor")
