"""The ``model_dirs`` preflight check: model and tokenizer paths name local directories."""

from __future__ import annotations

import re
import shutil
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


def _copy_of_the_default_model(directory: Path) -> Path:
    shutil.copytree(default_task_assets().model_dir, directory)
    return directory


def test_a_model_directory_without_weights_is_refused_by_name(tmp_path: Path) -> None:
    model = _copy_of_the_default_model(tmp_path / "noweights")
    (model / "model.safetensors").unlink()
    message = r"^actor.model_path='.*noweights' has config.json but no weights \(none of model"
    with pytest.raises(HfsdkError, match=message):
        check_model_path("actor.model_path", str(model))
    # A sharded model's index counts (from_pretrained reads the shards it names).
    (model / "model.safetensors.index.json").write_text("{}")
    check_model_path("actor.model_path", str(model))


def test_a_model_directory_with_a_broken_config_json_is_refused_by_name(tmp_path: Path) -> None:
    model = _copy_of_the_default_model(tmp_path / "badcfg")
    text = (model / "config.json").read_text()
    (model / "config.json").write_text(text[: len(text) // 2])
    with pytest.raises(HfsdkError, match=r"^critic.model_path='.*badcfg' .* not valid JSON"):
        check_model_path("critic.model_path", str(model))
    (model / "config.json").write_text("[]")
    with pytest.raises(HfsdkError, match=r"config.json holding a list, expected a JSON object"):
        check_model_path("critic.model_path", str(model))


def test_a_run_is_refused_before_it_starts_when_the_model_has_no_weights(tmp_path: Path) -> None:
    from hfsdk.core.trainer.preflight import prepare_run

    assets = default_task_assets()
    model = _copy_of_the_default_model(tmp_path / "noweights")
    (model / "model.safetensors").unlink()
    overrides = [
        f"data.train_files=[{assets.train_files[0]}]",
        f"actor.model_path={model}",
        "reward.functions=[{name: exact_match}]",
    ]
    config = load_run_config("grpo", None, overrides)
    spec = get_registry("algorithms")["grpo"].impl
    with pytest.raises(HfsdkError, match=r"^actor.model_path='.*noweights' has config.json but no"):
        prepare_run(config, spec)


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
