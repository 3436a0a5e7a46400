"""A run launched with relative model and data paths is exported, from another working
directory, with the files it trained on (not other files of the same names there)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.tasks import default_task_assets
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_testing import SMALL_GRPO


def _workdir(root: Path, max_length: int) -> Path:
    """A folder holding ``m1/`` (the default task's model, its tokenizer marked by
    ``model_max_length``) and ``rel.jsonl`` (the default task's prompts)."""
    assets = default_task_assets()
    root.mkdir()
    shutil.copytree(assets.model_dir, root / "m1")
    shutil.copy(assets.train_files[0], root / "rel.jsonl")
    tokenizer_config = root / "m1" / "tokenizer_config.json"
    settings = json.loads(tokenizer_config.read_text())
    tokenizer_config.write_text(json.dumps({**settings, "model_max_length": max_length}))
    return root


@pytest.mark.slow
def test_export_from_another_directory_reads_the_files_the_run_was_launched_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launch, elsewhere = _workdir(tmp_path / "a", 111), _workdir(tmp_path / "b", 222)
    run_dir = tmp_path / "run"
    monkeypatch.chdir(launch)
    overrides = [
        "trainer.total_steps=1",
        "trainer.save_every=1",
        "reward.functions=[{name: default_task}]",
    ]
    paths = ["actor.model_path=m1", "data.train_files=[rel.jsonl]"]
    config = load_run_config("grpo", None, [*SMALL_GRPO, *overrides, *paths])
    Trainer(config, run_dir, quiet=True).fit()

    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert recorded["actor"]["model_path"] == str(launch / "m1")
    assert recorded["data"]["train_files"] == [str(launch / "rel.jsonl")]

    monkeypatch.chdir(elsewhere)  # its own m1/ and rel.jsonl: another tokenizer
    with pytest.raises(SystemExit) as info:
        main(["export", str(run_dir), "--out", str(tmp_path / "out")])
    assert info.value.code == 0
    exported = json.loads((tmp_path / "out" / "actor" / "tokenizer_config.json").read_text())
    assert exported["model_max_length"] == 111
