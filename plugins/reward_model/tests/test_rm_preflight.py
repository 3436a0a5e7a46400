"""The reward-model preflight: data a step or a validation would refuse is refused up front."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hfsdk
from hfsdk import default_task_assets
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.preflight import prepare_run
from hfsdk_reward_model.spec import REWARD_MODEL_SPEC


def test_prompt_only_validation_rows_are_refused_naming_data_val_files() -> None:
    # The task's prompt-only val.jsonl passed, and the run stopped at its first validation
    # (after training) with "row 0 has no 'chosen' column value", read as a training row.
    val_file = default_task_assets().val_files[0]
    config = load_run_config(
        "reward_model", None, [f"data.val_files=[{val_file}]", "trainer.total_steps=1"]
    )
    with pytest.raises(hfsdk.HfsdkError) as caught:
        prepare_run(config, REWARD_MODEL_SPEC)
    message = str(caught.value)
    assert "data.val_files row" in message and "'chosen'" in message
    assert "\n" not in message


def test_pairs_longer_than_max_length_are_refused_before_any_step(tmp_path: Path) -> None:
    # Four short pairs and four of 30-word responses with max_length=20 passed; with one pair a
    # step, the first step that drew a long pair stopped the run ("no preference pairs to
    # train on"), and a resume stopped at the same step again.
    rows = [
        {"prompt": f"{i} + 1 =", "chosen": str(i + 1), "rejected": str(i + 3)} for i in range(4)
    ]
    rows += [
        {"prompt": f"{i} + 2 =", "chosen": " ".join(["1"] * 30), "rejected": " ".join(["2"] * 30)}
        for i in range(4)
    ]
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    overrides = [f"data.train_files=[{data}]", "data.val_files=[]", "algorithm.max_length=20"]
    overrides += ["data.batch_size=1", "trainer.total_steps=8", "trainer.val_before_train=false"]
    config = load_run_config("reward_model", None, overrides)
    with pytest.raises(hfsdk.HfsdkError) as caught:
        prepare_run(config, REWARD_MODEL_SPEC)
    message = str(caught.value)
    assert message.startswith("4 of 8 preference pairs are longer than algorithm.max_length=20")
    assert "\n" not in message
