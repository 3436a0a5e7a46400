"""Start-up deadline: scaled to the weights the roles load, or set in the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import get_registry
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.preflight import (
    STARTUP_BASE_S,
    STARTUP_S_PER_GIB,
    startup_deadline_s,
    weight_bytes,
)
from hfsdk.core.trainer.run_assets import RunAssets
from hfsdk_testing.models import tokenizer_only_dir


def _model(path: Path, weight_bytes_: int) -> Path:
    path.mkdir()
    (path / "config.json").write_text("{}")
    with (path / "model.safetensors").open("wb") as handle:
        handle.truncate(weight_bytes_)  # sparse: no real disk use
    return path


def test_the_startup_deadline_grows_with_the_largest_model(tmp_path: Path) -> None:
    small = _model(tmp_path / "small", 2**20)
    big = _model(tmp_path / "big", 4 * 2**30)
    assert weight_bytes(big) == 4 * 2**30 and weight_bytes(tmp_path / "absent") == 0
    config = load_run_config(
        "grpo", None, [f"actor.model_path={small}", f"reference.model_path={big}"]
    )
    assets = RunAssets(
        model_path=str(small),
        tokenizer_path=str(small),
        train_files=(),
        val_files=(),
        default_task=False,
    )
    spec = get_registry("algorithms")["grpo"].impl
    deadline = startup_deadline_s(config, spec, assets)
    assert deadline == pytest.approx(STARTUP_BASE_S + 4 * STARTUP_S_PER_GIB)
    fixed = load_run_config("grpo", None, ["trainer.startup_timeout_s=42"])
    assert startup_deadline_s(fixed, spec, assets) == 42.0


def test_a_tokenizer_only_directory_is_a_tokenizer_path_for_every_role(tmp_path: Path) -> None:
    from hfsdk import default_task_assets
    from hfsdk.core.trainer.preflight import prepare_run

    tokenizer = tokenizer_only_dir(tmp_path / "tokenizer")
    assets = default_task_assets()
    spec = get_registry("algorithms")["ppo"].impl
    overrides = [
        f"data.train_files=[{assets.train_files[0]}]",
        "reward.functions=[{name: exact_match}]",
        *(f"{role}.model_path={assets.model_dir}" for role in ("actor", "critic", "reference")),
        *(f"{role}.tokenizer_path={tokenizer}" for role in ("actor", "critic", "reference")),
    ]
    config = load_run_config("ppo", None, overrides)
    prepared = prepare_run(config, spec)
    assert prepared.assets.tokenizer_path == str(tokenizer)
    # The tokenizer is the one saved there: same ids as the model directory's own.
    text = "3 + 5 = 8"
    from transformers import PreTrainedTokenizerFast

    reference = PreTrainedTokenizerFast.from_pretrained(str(assets.model_dir))
    assert prepared.tokenizer(text)["input_ids"] == reference(text)["input_ids"]
