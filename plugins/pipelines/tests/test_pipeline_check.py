"""The pipeline check: generation ahead of training only where it can be."""

from __future__ import annotations

from pathlib import Path

import pytest
from hfsdk_pipelines.pipeline import check_pipeline

import hfsdk


@pytest.mark.parametrize(
    ("algo", "reason"),
    [
        ("reward_model", "generates nothing"),  # it trains a score model on given pairs
        ("sft", "samples nothing to generate ahead"),
        ("dpo", "samples nothing to generate ahead"),
    ],
)
def test_a_pipeline_is_refused_in_one_line_where_nothing_is_generated(
    algo: str, reason: str
) -> None:
    spec = hfsdk.get_registry("algorithms")[algo].impl
    check_pipeline(spec, "sync")
    with pytest.raises(hfsdk.HfsdkError, match=reason) as info:
        check_pipeline(spec, "one_step_off")
    assert "\n" not in str(info.value)


def test_the_check_runs_with_the_config() -> None:
    from hfsdk.core.config import load_run_config

    load_run_config("sft", None, ["trainer.pipeline=sync"])
    with pytest.raises(hfsdk.HfsdkError, match="samples nothing to generate ahead"):
        load_run_config("sft", None, ["trainer.pipeline=one_step_off"])


@pytest.mark.parametrize("pipeline", ["sync", "one_step_off"])
def test_max_staleness_without_the_async_pipeline_is_warned_about(pipeline: str) -> None:
    """``trainer.max_staleness`` is read only under ``trainer.pipeline: async``: set with
    another pipeline it would be ignored silently. A warning before the run starts, not a
    refusal: a run saved with such a config must still export, replay and resume."""
    from hfsdk_pipelines.pipeline import unread_max_staleness

    from hfsdk.core.config import load_run_config

    config = load_run_config("grpo", None, ["trainer.pipeline=async", "trainer.max_staleness=3"])
    assert unread_max_staleness(config) is None
    assert (
        unread_max_staleness(load_run_config("grpo", None, [f"trainer.pipeline={pipeline}"]))
        is None
    )
    overrides = [f"trainer.pipeline={pipeline}", "trainer.max_staleness=3"]
    warning = unread_max_staleness(load_run_config("grpo", None, overrides)) or ""
    assert warning.startswith("trainer.max_staleness=3 is read only with trainer.pipeline=async")
    assert "\n" not in warning
    assert "unread_max_staleness" in hfsdk.get_registry("preflight_checks")


def test_a_saved_config_with_max_staleness_and_another_pipeline_loads(tmp_path: Path) -> None:
    # Before: the refusal fired on a saved run's config.yaml too (benchmarks/async_vs_sync.py
    # wrote such runs), so export, replay and resume of it had no way through.
    import yaml

    from hfsdk.core.config import load_run_config

    saved = load_run_config("grpo", None, ["trainer.pipeline=one_step_off"]).to_dict()
    saved["trainer"]["max_staleness"] = 3
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(saved))
    config = load_run_config(None, path)
    assert (config.trainer.pipeline, config.trainer.max_staleness) == ("one_step_off", 3)
