"""``hfsdk export`` needs only the checkpoint and the models: a run whose training data is
gone since (a copied or cleaned-up run directory) exports; a role named twice is one role."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.tasks import default_task_assets
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_testing import SMALL_GRPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_without_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One step trained on a copy of the default task's prompts, the copy deleted since."""
    root = tmp_path_factory.mktemp("nodata")
    data = root / "mydata.jsonl"
    shutil.copy(default_task_assets().train_files[0], data)
    overrides = [
        "trainer.total_steps=1",
        "trainer.save_every=1",
        "reward.functions=[{name: default_task}]",
        f"data.train_files=[{data}]",
    ]
    config = load_run_config("grpo", None, [*SMALL_GRPO, *overrides])
    Trainer(config, root / "run", quiet=True).fit()
    data.unlink()
    return root / "run"


def _export(
    capsys: pytest.CaptureFixture[str], run_dir: Path, out: Path, *extra: str
) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(["export", str(run_dir), "--out", str(out), *extra])
    return int(info.value.code or 0), capsys.readouterr().err


def test_a_run_whose_data_is_gone_exports(
    run_without_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _export(capsys, run_without_data, tmp_path / "out")
    assert code == 0, err
    assert (tmp_path / "out" / "actor" / "config.json").is_file()


def test_a_role_named_twice_is_exported_once_into_out(
    run_without_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twice = ("--role", "actor", "--role", "actor")
    code, err = _export(capsys, run_without_data, tmp_path / "out", *twice)
    assert code == 0, err
    out = tmp_path / "out"
    assert (out / "config.json").is_file()  # one role asked for: --out is that role
    assert not (out / "actor").exists()
