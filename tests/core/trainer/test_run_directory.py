"""The run directory: which settings a resumed run may change, declared beside each field."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer import checkpoint
from hfsdk.core.trainer.checkpoint import COMPLETE_MARKER, write_checkpoint
from hfsdk.core.trainer.run_directory import (
    TRAINER_STATE,
    RunDirectory,
    config_changes,
    resumable_keys,
)


def test_resumable_settings_come_from_the_fields() -> None:
    config = load_run_config("safe_rlhf", None, [])
    keys = resumable_keys(config)
    assert {"trainer.total_steps", "sandbox.isolation", "reward.timeout_s"} <= keys
    assert "cost.timeout_s" in keys
    assert "trainer.seed" not in keys and "actor.optim" not in keys


def test_a_scoring_models_memory_levers_are_resumable() -> None:
    # Only a section's own fields were collected: reward.model.micro_batch_size was refused
    # on resume while critic.micro_batch_size was accepted.
    levers = ["reward.model.micro_batch_size=1", "reward.model.forward_micro_batch_size=2"]
    saved = load_run_config("ppo", None, ["reward.model={}"]).to_dict()
    assert config_changes(saved, load_run_config("ppo", None, ["reward.model={}", *levers])) == []
    other = load_run_config("ppo", None, ["reward.model={dtype: bfloat16}"])
    assert config_changes(saved, other) == ["reward.model.dtype"]


def test_only_unresumable_changes_are_reported() -> None:
    saved = load_run_config("grpo", None, ["trainer.total_steps=3"]).to_dict()
    longer = load_run_config("grpo", None, ["trainer.total_steps=9", "trainer.keep_last=2"])
    assert config_changes(saved, longer) == []
    other = load_run_config("grpo", None, ["trainer.seed=5", "actor.optim.lr=0.5"])
    assert config_changes(saved, other) == ["actor.optim.lr", "trainer.seed"]


def _saved(run_dir: Path, steps: list[int]) -> None:
    for step in steps:
        write_checkpoint(
            run_dir, step, lambda d, s=step: torch.save({"step": s}, d / TRAINER_STATE)
        )


def test_only_the_checkpoint_resumed_from_is_read(tmp_path: Path, monkeypatch) -> None:
    """Every start checksummed and unpickled every checkpoint (all are kept by default); the
    older ones are read only when the newer ones fail to load."""
    _saved(tmp_path, [1, 2, 3])
    read: list[str] = []
    real = checkpoint.file_checksum
    monkeypatch.setattr(
        checkpoint, "file_checksum", lambda p: read.append(p.parent.name) or real(p)
    )
    candidates = RunDirectory(tmp_path).usable_checkpoints()
    assert next(candidates)[0] == 3 and read == ["step_3"]
    assert [step for step, _, _ in candidates] == [2, 1]


def test_a_step_without_its_marker_is_damage_not_a_fresh_start(tmp_path: Path, caplog) -> None:
    """A published step_N always has its marker: one without it was skipped silently, and a
    run whose markers were all lost started over and overwrote its metrics."""
    _saved(tmp_path, [1, 2])
    (tmp_path / "checkpoints" / "step_2" / COMPLETE_MARKER).unlink()
    assert [step for step, _, _ in RunDirectory(tmp_path).usable_checkpoints()] == [1]
    assert "checkpoint step_2 is unusable" in caplog.text
    (tmp_path / "checkpoints" / "step_1" / COMPLETE_MARKER).unlink()
    with pytest.raises(HfsdkError, match="no usable checkpoint"):
        list(RunDirectory(tmp_path).usable_checkpoints())


@pytest.mark.parametrize("name", ["config.yaml", "metrics.jsonl", "hfsdk.log"])
def test_a_directory_that_is_no_run_is_not_overwritten(tmp_path: Path, name: str) -> None:
    """--run-dir on a user's folder replaced their own config.yaml and metrics.jsonl."""
    (tmp_path / name).write_text("# my notes\n")
    with pytest.raises(HfsdkError, match=f"holds {name} but no hfsdk run"):
        RunDirectory(tmp_path).check_path()
    (tmp_path / ".lock").touch()  # a run's directory (its lock file stays after the run)
    RunDirectory(tmp_path).check_path()
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.safetensors").touch()  # files the run never writes are left alone
    RunDirectory(other).check_path()


def test_an_entry_added_to_a_dict_setting_is_a_change() -> None:
    # An added rollout pool or role placement was skipped as "a key added to hfsdk later":
    # the resume then crashed (a pool) or ran silently at another data-parallel size.
    saved = load_run_config("grpo", None, []).to_dict()
    for override, key in (
        ("placement.pools.rollout.devices=1", "placement.pools.rollout"),
        ("placement.roles={reference: global}", "placement.roles.reference"),
    ):
        assert config_changes(saved, load_run_config("grpo", None, [override])) == [key]
    del saved["trainer"]["max_mismatch_kl"]  # a field added after the run started
    assert config_changes(saved, load_run_config("grpo", None, [])) == []


def test_the_docs_list_every_resumable_key() -> None:
    text = (Path(__file__).parents[3] / "docs" / "training.md").read_text()
    _, _, rest = text.partition("Only these keys may change on resume")
    listed = rest.split("Any other difference", 1)[0]
    for key in resumable_keys(load_run_config("grpo", None, [])):
        assert f"`{key}`" in listed or f"`{key.removeprefix('trainer.')}`" in listed, key


def test_a_run_saved_with_the_old_trainer_wandb_key_resumes(tmp_path: Path) -> None:
    # config.yaml written before the wandb section moved loaded, but the resume check diffed
    # the raw file and refused it: "trainer.wandb changed".
    import yaml

    config = load_run_config("grpo", None, ["wandb.project=p"])
    old = config.to_dict()
    old["trainer"]["wandb"] = old.pop("wandb")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old, sort_keys=False))
    _saved(tmp_path, [1])
    RunDirectory(tmp_path).check_config_matches(config)
    other = load_run_config("grpo", None, ["wandb.project=q"])
    with pytest.raises(HfsdkError, match=r"\(wandb\.project changed\)"):
        RunDirectory(tmp_path).check_config_matches(other)


@pytest.mark.parametrize("sink", ["tensorboard", "wandb", None])
def test_a_failed_run_that_logged_only_to_other_sinks_is_kept(tmp_path: Path, sink) -> None:
    # loggers without jsonl leave metrics.jsonl empty: a sink's output is the run's work.
    directory = RunDirectory(tmp_path / "runs" / "r")
    directory.create_and_lock()
    for name in ("config.yaml", "config_sources.yaml", "hfsdk.log", "metrics.jsonl"):
        (directory.path / name).write_text("")
    (directory.path / "checkpoints" / ".step_1.tmp-1").mkdir(parents=True)  # a save cut short
    if sink is not None:
        (directory.path / sink).mkdir()
        (directory.path / sink / "events").write_text("step 1")
    directory.abandon()
    assert directory.path.is_dir() == (sink is not None)
    assert (tmp_path / "runs").exists() == (sink is not None)  # a created parent goes too


def test_a_checkpoint_given_as_the_run_dir_names_the_run(tmp_path: Path) -> None:
    """--run-dir run/checkpoints/step_2 (or run/checkpoints) started a new run inside it."""
    _saved(tmp_path, [2])
    (tmp_path / "config.yaml").write_text("algo: grpo\n")
    # A user's project folder with its own config.yaml and runs under checkpoints/: no run.
    RunDirectory(tmp_path / "checkpoints" / "grpo1").check_path()
    (tmp_path / ".lock").touch()  # a run's directory (its lock file stays after the run)
    for inside in (tmp_path / "checkpoints" / "step_2", tmp_path / "checkpoints"):
        with pytest.raises(HfsdkError, match=f"inside the checkpoints of run '{tmp_path}'; pass"):
            RunDirectory(inside).check_path()
    RunDirectory(tmp_path).check_path()
