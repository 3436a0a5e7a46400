"""The run directory: which settings a resumed run may change, declared beside each field."""

from __future__ import annotations

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.run_directory import config_changes, resumable_keys


def test_resumable_settings_come_from_the_fields() -> None:
    config = load_run_config("safe_rlhf", None, [])
    keys = resumable_keys(config)
    assert {("trainer", "total_steps"), ("sandbox", "isolation"), ("reward", "timeout_s")} <= keys
    assert ("cost", "timeout_s") in keys
    assert ("trainer", "seed") not in keys and ("actor", "optim") not in keys


def test_only_unresumable_changes_are_reported() -> None:
    saved = load_run_config("grpo", None, ["trainer.total_steps=3"]).to_dict()
    longer = load_run_config("grpo", None, ["trainer.total_steps=9", "trainer.keep_last=2"])
    assert config_changes(saved, longer) == []
    other = load_run_config("grpo", None, ["trainer.seed=5", "actor.optim.lr=0.5"])
    assert config_changes(saved, other) == ["actor.optim.lr", "trainer.seed"]
