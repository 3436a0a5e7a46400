"""GRPO's config checks across sections."""

from __future__ import annotations

import pytest

from hfsdk import ConfigError
from hfsdk.core.config import load_run_config


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "reinforce_plus_plus_baseline"])
def test_a_group_of_one_sample_is_refused_for_group_relative_estimators(estimator: str) -> None:
    # Before: accepted; every advantage was 0 and the run trained nothing, silently.
    settings = ["algorithm.n_samples_per_prompt=1", f"algorithm.advantage_estimator={estimator}"]
    with pytest.raises(
        ConfigError, match=f"n_samples_per_prompt=1 with advantage_estimator '{estimator}'"
    ):
        load_run_config("grpo", None, settings)
    load_run_config(
        "grpo", None, [*settings[:1], "algorithm.advantage_estimator=reinforce_plus_plus"]
    )
    load_run_config("grpo", None, ["algorithm.n_samples_per_prompt=2", settings[1]])


def _gspo_warning(*settings: str) -> str | None:
    from hfsdk_grpo.losses import gspo_aggregation_warning

    return gspo_aggregation_warning(load_run_config("grpo", None, list(settings)), None, None)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_gspo_with_another_aggregation_than_the_papers_is_warned_about(mode: str) -> None:
    # Before: GRPO's default token-mean reached gspo and trained a length-weighted variant,
    # silently (the loss's own seq-mean-token-mean applies only without an aggregation).
    line = _gspo_warning("algorithm.policy_loss=gspo", f"algorithm.loss_agg_mode={mode}")
    assert line is not None and "\n" not in line
    assert f"algorithm.policy_loss=gspo (plugin 'grpo') with algorithm.loss_agg_mode={mode}" in line
    assert "set algorithm.loss_agg_mode=seq-mean-token-mean" in line


def test_gspo_is_warned_about_at_grpos_default_mode() -> None:
    assert _gspo_warning("algorithm.policy_loss=gspo") is not None


def test_gspo_with_the_papers_aggregation_and_other_losses_are_not_warned_about() -> None:
    assert (
        _gspo_warning("algorithm.policy_loss=gspo", "algorithm.loss_agg_mode=seq-mean-token-mean")
        is None
    )
    assert _gspo_warning() is None  # ppo_clip at token-mean


def test_the_gspo_warning_is_a_preflight_check_of_the_grpo_plugin() -> None:
    # A preflight check's line is logged once, before any worker starts (docs/plugin_hooks.md).
    from hfsdk import get_registry
    from hfsdk_grpo.losses import gspo_aggregation_warning

    entry = get_registry("preflight_checks")["gspo_aggregation"]
    assert entry.impl is gspo_aggregation_warning and entry.plugin == "grpo"


def test_the_dr_grpo_example_of_the_algorithm_docs_is_dr_grpo(tmp_path) -> None:
    # Before: the example called norm_by_std: false alone "Dr.GRPO", at token-mean.
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[3] / "docs" / "algorithms.md"
    (example,) = [
        block
        for block in re.findall(r"^```yaml\n(.*?)^```", doc.read_text(), re.M | re.S)
        if "Dr.GRPO" in block
    ]
    path = tmp_path / "dr_grpo.yaml"
    path.write_text(example)
    config = load_run_config("grpo", str(path))
    # What hfsdk's importers map TRL's and OpenRLHF's dr_grpo to.
    assert config.algorithm.loss_agg_mode == "seq-mean-token-sum-norm"
    assert config.advantage.norm_by_std is False


@pytest.mark.parametrize("algo", ["grpo", "dapo"])
def test_an_epsilon_without_the_std_division_is_refused(algo: str) -> None:
    # Before: accepted; epsilon only guards the std division, which norm_by_std=false
    # (Dr.GRPO) skips, so any epsilon loaded and changed nothing.
    settings = ["advantage.norm_by_std=false", "advantage.epsilon=0.5"]
    with pytest.raises(ConfigError) as info:
        load_run_config(algo, None, settings)
    message = str(info.value)
    assert "\n" not in message
    assert "advantage.epsilon=0.5 with advantage.norm_by_std=false" in message
    assert "remove advantage.epsilon" in message
    load_run_config(algo, None, settings[:1])  # Dr.GRPO at the default epsilon
    load_run_config(algo, None, ["advantage.norm_by_std=true", settings[1]])


def test_every_algorithms_default_config_still_loads() -> None:
    from hfsdk import get_registry

    for algo in get_registry("algorithms"):
        load_run_config(algo, None, [])
