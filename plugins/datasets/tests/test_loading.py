"""``load_run_prompts``: what the plugin answers ``hfsdk_load_prompts`` with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk import HfsdkError, PromptRequest, load_run_config
from hfsdk_datasets import load_run_prompts

ROWS = [
    {"prompt": "add one and two", "answer": "three"},
    {"prompt": "add two", "answer": "two"},
    {"prompt": "one", "answer": "one"},
]


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _request(tokenizer, train: str, val: str | None = None, *overrides: str) -> PromptRequest:  # type: ignore[no-untyped-def]
    config = load_run_config("grpo", None, ["data.batch_size=2", *overrides])
    return PromptRequest(
        config=config,
        train_files=(train,),
        val_files=(val,) if val else (),
        tokenizer=tokenizer,
        tokenizer_path="/models/words",
        builtin_tokenizer=False,
    )


def test_train_stream_validation_set_and_row_columns(tokenizer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    train = _jsonl(tmp_path / "train.jsonl", ROWS)
    val = _jsonl(tmp_path / "val.jsonl", ROWS[:2])
    prompts = load_run_prompts(_request(tokenizer, train, val, "data.shuffle=false"))
    assert list(prompts.train.next_batch()["answer"]) == ["three", "two"]
    assert prompts.train.state_dict() == {"epoch": 0, "index": 2, "order": 2}
    whole = prompts.validation.whole()
    assert list(whole["raw_prompt"]) == ["add one and two", "add two"]
    assert prompts.validation.whole() is not whole  # callers may change a batch's meta
    assert set(prompts.row_columns) == {
        "prompt", "answer", "uid", "raw_prompt", "prompt_messages", "rendered_prompt", "data_dir"
    }  # fmt: skip
    assert set(whole["data_dir"]) == {str(tmp_path.resolve())}  # relative paths resolve there
    assert load_run_prompts(_request(tokenizer, train)).validation is None


def test_prompts_the_tokenizer_cannot_read_stop_the_run(tokenizer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rows = [{"prompt": "what is seven plus eight", "answer": "15"}] * 3
    train = _jsonl(tmp_path / "train.jsonl", rows)
    with pytest.raises(HfsdkError, match=r"100% of the prompt tokens .* '/models/words'"):
        load_run_prompts(_request(tokenizer, train))
    loaded = load_run_prompts(_request(tokenizer, train, None, "data.max_unknown_token_share=1"))
    assert len(loaded.train.next_batch(1)) == 1  # the check turned off


def test_one_saved_dataset_dict_gives_training_and_validation_their_splits(  # type: ignore[no-untyped-def]
    tokenizer, tmp_path: Path
) -> None:
    import datasets

    folder = str(tmp_path / "dd")
    splits = {"train": ROWS[:2], "test": ROWS[2:]}
    parts = {name: datasets.Dataset.from_list(rows) for name, rows in splits.items()}
    datasets.DatasetDict(parts).save_to_disk(folder)
    prompts = load_run_prompts(_request(tokenizer, folder, folder))
    assert [r["answer"] for r in prompts.train.rows] == ["three", "two"]
    assert [r["answer"] for r in prompts.validation.rows] == ["one"]  # not the training rows


def test_validation_prompts_the_tokenizer_cannot_read_stop_the_run(  # type: ignore[no-untyped-def]
    tokenizer, tmp_path: Path
) -> None:
    train = _jsonl(tmp_path / "train.jsonl", ROWS)
    val = _jsonl(tmp_path / "val.jsonl", [{"prompt": "what is seven plus eight"}] * 2)
    with pytest.raises(HfsdkError) as info:
        load_run_prompts(_request(tokenizer, train, val))
    assert str(info.value).startswith(
        "100% of the prompt tokens (column 'prompt') of the validation data "
        f"(data.val_files: {val}) are unknown to the tokenizer in '/models/words'"
    )
    both = _request(tokenizer, train, val, "data.max_unknown_token_share=1")
    assert len(load_run_prompts(both).validation) == 2  # the check turned off


def test_length_errors_say_which_data_and_files(tokenizer, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    train = _jsonl(tmp_path / "train.jsonl", ROWS)
    val = _jsonl(tmp_path / "val.jsonl", [ROWS[0]])
    with pytest.raises(HfsdkError) as info:
        load_run_prompts(_request(tokenizer, train, val, "data.max_prompt_length=2"))
    assert str(info.value) == (
        f"every prompt of the validation data (data.val_files: {val}) is longer than "
        "data.max_prompt_length=2 tokens; raise the limit"
    )
    assert f"from the training data (data.train_files: {train})" in caplog.text
