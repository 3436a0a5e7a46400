"""Settings refused before (or at the first checkpoint of) a run, not deep inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.errors import ConfigError
from hfsdk.core.trainer.input_checks import check_keep_best_reported


def test_an_unreported_keep_best_metric_names_the_close_ones() -> None:
    check_keep_best_reported("reward/mean", {"reward/mean", "actor/kl"})
    with pytest.raises(ConfigError, match=r"keep_best=val/pass@3: .*did you mean val/pass@1"):
        check_keep_best_reported("val/pass@3", {"val/pass@1", "val/reward_mean", "actor/kl"})


@pytest.mark.slow
def test_keep_best_on_a_metric_no_step_reports_stops_at_the_first_checkpoint(
    tmp_path: Path,
) -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.checkpoint import complete_checkpoints
    from hfsdk.core.trainer.trainer import Trainer

    overrides = [
        "trainer.total_steps=3",
        "trainer.save_every=1",
        "trainer.keep_last=1",
        "trainer.keep_best=reward/meen",
    ]
    config = load_run_config("grpo", None, overrides)
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"keep_best=reward/meen: .*did you mean reward/mean"):
        Trainer(config, run_dir, quiet=True).fit()
    rows = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 1  # refused at step 1's checkpoint, not after the whole run
    assert complete_checkpoints(run_dir) == []


def test_keep_best_needs_the_jsonl_logger() -> None:
    """It ranks metrics.jsonl's steps: without the logger, an earlier run's or none."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.input_checks import check_keep_best_source

    config = load_run_config("grpo", None, ["trainer.keep_best=reward/mean", "trainer.keep_last=1"])
    check_keep_best_source(config, has_validation_data=False)
    config = load_run_config(
        "grpo", None, ["trainer.keep_best=reward/mean", "trainer.loggers=[console]"]
    )
    with pytest.raises(ConfigError, match=r"keep_best=reward/mean ranks the steps in metrics"):
        check_keep_best_source(config, has_validation_data=False)


@pytest.mark.parametrize(
    ("val_every", "save_every", "total", "refused"),
    [(3, 2, 12, True), (4, 2, 12, False), (2, 2, 12, False), (3, 0, 10, True), (5, 0, 10, False)],
)
def test_keep_best_on_validation_needs_validated_save_steps(
    val_every: int, save_every: int, total: int, refused: bool
) -> None:
    """Only a validated step with a checkpoint can be kept (retention.best_step)."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.input_checks import check_keep_best_source

    config = load_run_config(
        "grpo",
        None,
        [
            "trainer.keep_best=val/pass@1",
            f"trainer.val_every={val_every}",
            f"trainer.save_every={save_every}",
            f"trainer.total_steps={total}",
        ],
    )
    if not refused:
        check_keep_best_source(config, has_validation_data=True)
        return
    with pytest.raises(ConfigError, match=r"a multiple of trainer\.save_every"):
        check_keep_best_source(config, has_validation_data=True)
