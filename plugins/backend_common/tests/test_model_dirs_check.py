"""The ``model_dirs`` preflight check: model and tokenizer paths name local directories."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hfsdk import HfsdkError, default_task_assets, get_registry, load_run_config
from hfsdk_backend_common.model_dirs_check import check_model_path, check_tokenizer_path
from hfsdk_testing.models import tokenizer_only_dir


def test_a_directory_without_a_tokenizer_is_refused_by_name(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    check_tokenizer_path("actor.tokenizer_path", str(tokenizer_only_dir(tmp_path / "tokenizer")))
    with pytest.raises(HfsdkError, match=r"critic.tokenizer_path='.*empty' holds no tokenizer"):
        check_tokenizer_path("critic.tokenizer_path", str(empty))
    with pytest.raises(HfsdkError, match="is not a directory"):
        check_tokenizer_path("actor.tokenizer_path", str(tmp_path / "absent"))


def test_a_model_path_must_be_a_saved_model(tmp_path: Path) -> None:
    check_model_path("actor.model_path", str(default_task_assets().model_dir))
    with pytest.raises(HfsdkError, match=r"reference.model_path='.*absent' does not exist"):
        check_model_path("reference.model_path", str(tmp_path / "absent"))
    with pytest.raises(HfsdkError, match=r"is not an HF model directory \(no config.json"):
        check_model_path("actor.model_path", str(tokenizer_only_dir(tmp_path / "tokenizer")))


@pytest.mark.parametrize("key", ["critic.model_path", "reward.model.model_path"])
def test_a_run_names_the_role_whose_model_directory_is_missing(key: str, tmp_path: Path) -> None:
    from hfsdk.core.trainer.preflight import prepare_run

    assets = default_task_assets()
    overrides = [
        f"data.train_files=[{assets.train_files[0]}]",
        f"actor.model_path={assets.model_dir}",
        f"{key}={tmp_path / 'absent'}",
        *(["reward.functions=[{name: exact_match}]"] if key.startswith("critic") else []),
    ]
    config = load_run_config("ppo", None, overrides)
    spec = get_registry("algorithms")["ppo"].impl
    with pytest.raises(HfsdkError, match=rf"^{re.escape(key)}='.*absent' does not exist"):
        prepare_run(config, spec)
