"""A run directory's config.yaml shows the reward functions that really scored the run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

ONE_STEP = [
    "trainer.total_steps=1",
    "trainer.save_every=1",
    "trainer.executor=local",
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
]


@pytest.mark.slow
def test_a_default_task_runs_config_yaml_names_the_reward_that_ran(tmp_path: Path) -> None:
    import hfsdk

    config = load_run_config("grpo", None, ONE_STEP)
    assert config.reward.functions == ()  # the config names none: the default task's score
    rows = Trainer(config, tmp_path, quiet=True).fit()
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    expected = list(hfsdk.get_task().signals["reward"])
    assert [f["name"] for f in saved["reward"]["functions"]] == expected == ["default_task"]
    assert rows[-1]["step"] == 1 and "reward/mean" in rows[-1]
    # The same command resumes: the filled-in signals are not a changed config.
    resumed = Trainer(load_run_config("grpo", None, ONE_STEP), tmp_path, quiet=True)
    assert resumed.resume_from is not None and resumed.resume_from[0] == 1
    resumed.close()
