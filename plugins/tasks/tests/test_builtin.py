"""The plugin registers the addition task as ``default``: variants, data kinds, its signals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hfsdk
from hfsdk_tasks.builtin import ADDITION_TASK, addition_model_config
from hfsdk_tasks.task import COST_FUNCTION_NAME, REWARD_FUNCTION_NAME


def test_the_plugin_registers_the_default_task_and_its_signals() -> None:
    assert hfsdk.get_task() is ADDITION_TASK
    assert hfsdk.get_registry("tasks")["default"].plugin == "tasks"
    rewards = hfsdk.get_registry("reward_functions")
    assert rewards[REWARD_FUNCTION_NAME].plugin == rewards[COST_FUNCTION_NAME].plugin == "tasks"
    assert dict(ADDITION_TASK.signals) == {
        "reward": (REWARD_FUNCTION_NAME,),
        "cost": (COST_FUNCTION_NAME,),
    }


@pytest.mark.slow
def test_model_variants_share_tokenizer_and_data_and_differ_in_weights() -> None:
    warm, cold, partial = (ADDITION_TASK.build(model=m) for m in ("warm", "cold", "partial"))
    assert len({warm.model_dir, cold.model_dir, partial.model_dir}) == 3
    assert warm.tokenizer_dir == cold.tokenizer_dir == partial.tokenizer_dir
    assert warm.train_files == cold.train_files == partial.train_files
    steps = {
        name: json.loads((a.model_dir.parent / "spec.json").read_text())["spec"]["warm_start_steps"]
        for name, a in (("warm", warm), ("cold", cold), ("partial", partial))
    }
    assert steps == {"warm": 160, "cold": 0, "partial": 30}
    # The shape the config checks read without building is the built model's.
    built = json.loads((warm.model_dir / "config.json").read_text())
    for key, value in addition_model_config().items():
        assert built[key] == value, key


def test_preference_pairs_are_the_right_answer_over_a_wrong_one() -> None:
    pairs = ADDITION_TASK.build(data="preference_pairs")
    rows = [json.loads(line) for line in Path(pairs.train_files[0]).read_text().splitlines()]
    assert rows and all(r["chosen"] == r["answer"] != r["rejected"] for r in rows)


def test_validation_pairs_use_wrong_answers_their_prompt_never_trained_on() -> None:
    from hfsdk_tasks.pairs import preference_rows

    spec = hfsdk.default_task_assets().spec
    train, val = preference_rows(spec, "train"), preference_rows(spec, "val")
    seen = {(r["prompt"], r["rejected"]) for r in train}
    # Before: drawn independently, 4 of the 32 validation pairs were training pairs.
    assert [r for r in val if (r["prompt"], r["rejected"]) in seen] == []
    assert val and all(r["chosen"] == r["answer"] != r["rejected"] for r in val)
    pairs = ADDITION_TASK.build(data="preference_pairs")
    written = [json.loads(line) for line in Path(pairs.val_files[0]).read_text().splitlines()]
    assert written == val  # the file on disk is rebuilt, not an older cache


def test_a_training_prompt_gets_a_different_wrong_answer_in_each_of_its_pairs() -> None:
    from hfsdk_tasks.pairs import PAIRS_PER_PROMPT, preference_rows

    spec = hfsdk.default_task_assets().spec
    train = preference_rows(spec, "train")
    pairs = [(r["prompt"], r["rejected"]) for r in train]
    # Before: the repeats were drawn independently: 8 of the 200 pairs were repeats.
    assert len(set(pairs)) == len(pairs)
    assert len(train) == len({r["prompt"] for r in train}) * PAIRS_PER_PROMPT


def test_a_task_too_small_for_distinct_pairs_is_one_line() -> None:
    from hfsdk_tasks.pairs import preference_rows
    from hfsdk_tasks.spec import DefaultTaskSpec

    # Answers 0..2: two wrong ones per prompt, both taken by its training pairs.
    with pytest.raises(hfsdk.HfsdkError, match=r"^max_operand=1 leaves .* use max_operand >= 2$"):
        preference_rows(DefaultTaskSpec(max_operand=1), "val")


def test_an_unknown_variant_is_one_line() -> None:
    with pytest.raises(hfsdk.HfsdkError, match="no 'huge' model; it offers warm, cold, partial"):
        ADDITION_TASK.build(model="huge")
