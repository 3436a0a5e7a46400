"""The validation data is checked against the reward functions' columns before the run, as
the training data is, and the refusal names the validation files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hfsdk
from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.preflight import PreparedRun, prepare_run

SMALL = ["data.batch_size=2", "trainer.executor=local", "reward.functions=[{name: exact_match}]"]


def _jsonl(path: Path, answer_key: str) -> str:
    rows = [{"prompt": "2 + 3 =", answer_key: "5"}, {"prompt": "1 + 1 =", answer_key: "2"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _prepare(tmp_path: Path, val_answer_key: str) -> PreparedRun:
    train = _jsonl(tmp_path / "train.jsonl", "answer")
    val = _jsonl(tmp_path / "val.jsonl", val_answer_key)
    files = [f"data.train_files=[{train}]", f"data.val_files=[{val}]", "trainer.val_every=2"]
    config = load_run_config("grpo", None, [*SMALL, *files])
    return prepare_run(config, hfsdk.get_registry("algorithms")["grpo"].impl)


def test_validation_rows_without_a_functions_column_are_refused_naming_val_files(
    tmp_path: Path,
) -> None:
    with pytest.raises(HfsdkError) as info:
        _prepare(tmp_path, "solution")
    line = str(info.value)
    assert "\n" not in line
    val = re.escape(str(tmp_path / "val.jsonl"))
    assert re.match(rf"the validation data \(data\.val_files=\['{val}'\]\): ", line), line
    assert "'exact_match' reads the dataset column 'answer'" in line and "solution" in line


def test_validation_rows_with_the_columns_pass(tmp_path: Path) -> None:
    assert _prepare(tmp_path, "answer").val_loader is not None
