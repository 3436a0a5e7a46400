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


def _mixed_data(tmp_path: Path, short: int, long: int) -> Path:
    rows = [
        {"prompt": f"{i} + 1 =", "chosen": str(i + 1), "rejected": str(i + 3)} for i in range(short)
    ]
    rows += [
        {"prompt": f"{i} + 2 =", "chosen": " ".join(["1"] * 30), "rejected": " ".join(["2"] * 30)}
        for i in range(long)
    ]
    data = tmp_path / f"mixed_{short}_{long}.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return data


def _overrides(data: Path, steps: int) -> list[str]:
    return [
        f"data.train_files=[{data}]",
        "data.val_files=[]",
        "algorithm.max_length=20",
        "data.batch_size=1",
        f"trainer.total_steps={steps}",
        "trainer.val_before_train=false",
        "trainer.seed=2",
    ]


def test_a_step_whose_pairs_are_all_too_long_draws_the_next_rows(tmp_path: Path) -> None:
    # Four short pairs and four of 30-word responses with max_length=20, one pair a step:
    # step 2 drew a long pair and stopped the run ("no preference pairs to train on"), and a
    # resume stopped at the same step again. Now the step trains on the next short pair.
    from hfsdk.core.trainer.trainer import Trainer

    config = load_run_config("reward_model", None, _overrides(_mixed_data(tmp_path, 4, 4), 4))
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    assert all(row["pairs/count"] == 1.0 for row in rows)


def test_data_whose_every_pair_is_too_long_is_refused_before_any_step(tmp_path: Path) -> None:
    config = load_run_config("reward_model", None, _overrides(_mixed_data(tmp_path, 0, 3), 2))
    with pytest.raises(hfsdk.HfsdkError) as caught:
        prepare_run(config, REWARD_MODEL_SPEC)
    message = str(caught.value)
    assert message.startswith(
        "all 3 preference pairs (rows) are longer than algorithm.max_length=20"
    )
    assert "\n" not in message
