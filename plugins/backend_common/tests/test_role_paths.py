"""A role's (and the judge's) model and tokenizer paths: a relative directory that exists is
recorded absolute, so a run's config.yaml names the same model from any directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk_backend_common.judge import JudgeConfig


@pytest.fixture
def launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory, holding the model directories ``m1/`` and ``tok/``."""
    (tmp_path / "m1").mkdir()
    (tmp_path / "tok").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_model_and_tokenizer_paths_are_recorded_absolute(launch: Path) -> None:
    given = ["actor.model_path=m1", "actor.tokenizer_path=tok", "reference.model_path=Org/hub-name"]
    data = load_run_config("grpo", None, given).to_dict()
    assert data["actor"]["model_path"] == str(launch / "m1")
    assert data["actor"]["tokenizer_path"] == str(launch / "tok")
    # Not a directory here: left as given (a hub name, or the loader's error names it).
    assert data["reference"]["model_path"] == "Org/hub-name"


def test_the_judges_model_path_is_made_absolute(launch: Path) -> None:
    assert JudgeConfig(model_path="m1").model_path == str(launch / "m1")
    assert JudgeConfig(model_path="missing").model_path == "missing"
    assert JudgeConfig().model_path is None
