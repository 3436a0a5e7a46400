"""Placement config: which pool a role runs on when the config does not say."""

from __future__ import annotations

from pathlib import Path

from hfsdk.core.config import load_run_config


def test_a_rollout_pool_alone_leaves_the_roles_a_pool(tmp_path: Path) -> None:
    # The natural first try, in a config file: only the rollout replicas' pool.
    cfg = tmp_path / "c.yaml"
    cfg.write_text("placement:\n  pools:\n    rollout:\n      devices: 1\n")
    config = load_run_config("grpo", str(cfg), ["trainer.pipeline=one_step_off"])
    assert list(config.placement.pools) == ["global", "rollout"]
    assert config.placement.pool_of("actor") == "global"


def test_the_rollout_pool_never_receives_a_role_implicitly() -> None:
    overrides = [
        "placement.pools={rollout: {devices: 1}, train: {devices: 1}}",
        "trainer.pipeline=one_step_off",
    ]
    config = load_run_config("grpo", None, overrides)
    assert list(config.placement.pools) == ["rollout", "train"]  # rollout listed first
    for role in ("actor", "reference"):
        assert config.placement.pool_of(role) == "train"
    # That the rollout pool's check accepts these, and refuses the policy placed there by
    # name, is the pipelines plugin's test (plugins/pipelines/tests/test_rollout_pool_checks.py).
