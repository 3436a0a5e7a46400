"""The pipeline check: generation ahead of training only where it can be."""

from __future__ import annotations

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
def test_max_staleness_without_the_async_pipeline_is_refused_with_the_config(
    pipeline: str,
) -> None:
    """``trainer.max_staleness`` is read only under ``trainer.pipeline: async``: set with
    another pipeline it would be ignored silently."""
    from hfsdk.core.config import load_run_config

    load_run_config("grpo", None, ["trainer.pipeline=async", "trainer.max_staleness=3"])
    load_run_config("grpo", None, [f"trainer.pipeline={pipeline}"])
    with pytest.raises(hfsdk.HfsdkError, match=r"trainer\.pipeline=async") as info:
        load_run_config("grpo", None, [f"trainer.pipeline={pipeline}", "trainer.max_staleness=3"])
    assert "trainer.max_staleness=3" in str(info.value)
    assert "\n" not in str(info.value)
