"""A LoRA adapter directory given as a model path is named as one, with the merged model's path.

Before, it got the generic "not an HF model directory (no config.json there)", which does
not say that the run's ``actor_hf/`` of a LoRA run is the adapter alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hfsdk import HfsdkError, default_task_assets
from hfsdk_backend_common.model_dirs_check import check_model_path
from hfsdk_testing import assert_refused_in_one_line


def _adapter_dir(path: Path) -> Path:
    """What a LoRA run's ``actor_hf/`` holds without its merged model: adapter and tokenizer."""
    from hfsdk import load_tokenizer

    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4}))
    (path / "adapter_model.safetensors").write_bytes(b"")
    load_tokenizer(default_task_assets().model_dir).save_pretrained(str(path))
    return path


def test_an_adapter_directory_points_to_its_merged_model(tmp_path: Path) -> None:
    adapter = _adapter_dir(tmp_path / "step_2" / "actor_hf")
    (adapter / "merged").mkdir()  # what actor.lora.export_merged=true writes beside the adapter
    merged = re.escape(repr(str(adapter / "merged")))
    with pytest.raises(HfsdkError, match=rf"holds a LoRA adapter, not a model .*{merged}") as got:
        check_model_path("actor.model_path", str(adapter))
    assert "\n" not in str(got.value)


def test_an_adapter_directory_without_a_merged_model_says_how_to_write_one(
    tmp_path: Path,
) -> None:
    # Before: it pointed at <dir>/merged, which only actor.lora.export_merged=true writes.
    adapter = _adapter_dir(tmp_path / "step_2" / "actor_hf")
    with pytest.raises(HfsdkError, match=r"holds a LoRA adapter, not a model") as got:
        check_model_path("actor.model_path", str(adapter))
    message = str(got.value)
    assert "\n" not in message and str(adapter / "merged") not in message
    assert "hfsdk export RUN_DIR --out DIR --lora-merged" in message
    assert "DIR/actor/merged" in message and "actor.lora.export_merged=true" in message


def test_the_cli_refuses_an_adapter_model_path_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    adapter = _adapter_dir(tmp_path / "actor_hf")
    assets = default_task_assets()
    assert_refused_in_one_line(
        ["run", "--algo", "grpo", "--run-dir", str(tmp_path / "run"),
         f"data.train_files=[{assets.train_files[0]}]", "reward.functions=[{name: exact_match}]",
         f"actor.model_path={adapter}"],
        r"^Error: actor\.model_path=.*holds a LoRA adapter.*merged",
        capsys,
        root=tmp_path,
    )  # fmt: skip
