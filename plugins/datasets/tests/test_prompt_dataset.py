"""Prompt datasets: formats, column and emptiness errors, length filter, batching, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk import DataConfig, HfsdkError
from hfsdk_datasets.prompt_dataset import PromptLoader, load_prompt_dataset

ROWS = [
    {"prompt": "add one and two", "answer": "three"},
    {"prompt": "add two", "answer": "two"},
    {"prompt": "add one and two and three please now", "answer": "six"},
    {"prompt": "one", "answer": "one"},
]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_parquet_and_saved_directory_load_the_same(tmp_path: Path) -> None:
    import datasets

    jsonl = _write_jsonl(tmp_path / "p.jsonl", ROWS)
    ds = datasets.Dataset.from_list(ROWS)
    ds.to_parquet(str(tmp_path / "p.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    for source in (jsonl, tmp_path / "p.parquet", tmp_path / "saved"):
        loaded = load_prompt_dataset([str(source)], "prompt")
        assert loaded["prompt"] == [r["prompt"] for r in ROWS]
    both = load_prompt_dataset([str(jsonl), str(tmp_path / "p.parquet")], "prompt")
    assert len(both) == 8


def test_clear_errors(tmp_path: Path) -> None:
    jsonl = _write_jsonl(tmp_path / "p.jsonl", ROWS)
    with pytest.raises(HfsdkError, match="has no column 'question'"):
        load_prompt_dataset([str(jsonl)], "question")
    with pytest.raises(HfsdkError, match="does not exist"):
        load_prompt_dataset([str(tmp_path / "nope.jsonl")], "prompt")
    (tmp_path / "p.csvx").write_text("x")
    with pytest.raises(HfsdkError, match="unknown format"):
        load_prompt_dataset([str(tmp_path / "p.csvx")], "prompt")
    empty = tmp_path / "empty.parquet"
    import datasets

    datasets.Dataset.from_dict({"prompt": []}).to_parquet(str(empty))
    with pytest.raises(HfsdkError, match="is empty"):
        load_prompt_dataset([str(empty)], "prompt")


def test_a_column_datasets_would_read_back_changed_is_refused(tmp_path: Path) -> None:
    mixed = [{"prompt": "a", "answer": "abc"}, {"prompt": "b", "answer": 8}]
    _write_jsonl(tmp_path / "m.jsonl", [*mixed, {"prompt": "c", "answer": "007"}])
    with pytest.raises(HfsdkError) as info:
        load_prompt_dataset([str(tmp_path / "m.jsonl")], "prompt")
    assert str(info.value) == (
        "dataset '" + str(tmp_path / "m.jsonl") + "': column 'answer' mixes types across rows, "
        "and row 2's '007' reads back as 7; give the column one type in every row (e.g. quote "
        "every value, or make every value an object)"
    )
    # strings that are no JSON come back as written; objects with differing keys too
    rows = [*mixed, {"prompt": "c", "extra": {"x": 1}}, {"prompt": "d", "extra": {"y": "s"}}]
    loaded = load_prompt_dataset([str(_write_jsonl(tmp_path / "ok.jsonl", rows))], "prompt")
    assert loaded["answer"] == ["abc", 8, None, None]
    assert loaded["extra"] == [None, None, {"x": 1}, {"y": "s"}]


def test_a_file_that_is_not_utf8_or_not_jsonl_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "latin1.jsonl").write_bytes('{"prompt": "café"}\n'.encode("latin-1"))
    with pytest.raises(HfsdkError, match=r"latin1.jsonl' is not UTF-8 text \(byte 15\)"):
        load_prompt_dataset([str(tmp_path / "latin1.jsonl")], "prompt")
    (tmp_path / "twice.jsonl").write_text('{"prompt": "a", "prompt": "b"}\n')
    with pytest.raises(HfsdkError, match=r"could not be read \(.*specified twice"):
        load_prompt_dataset([str(tmp_path / "twice.jsonl")], "prompt")


def test_long_prompts_are_dropped_and_batches_left_padded(tokenizer, caplog) -> None:  # type: ignore[no-untyped-def]
    import datasets

    config = DataConfig(batch_size=3, max_prompt_length=4, shuffle=False)
    with caplog.at_level("WARNING"):
        loader = PromptLoader(datasets.Dataset.from_list(ROWS), tokenizer, config, seed=0)
    assert loader.dropped == 1 and len(loader) == 3
    assert "dropped 1 of 4 prompts" in caplog.text
    batch = loader.next_batch()
    assert batch["input_ids"].tolist() == [[2, 3, 6, 4], [0, 0, 2, 4], [0, 0, 0, 3]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]]
    assert list(batch["answer"]) == ["three", "two", "one"]
    assert list(batch["uid"]) == [0, 1, 3]
    assert list(batch["raw_prompt"]) == ["add one and two", "add two", "one"]
    # wraps into the next epoch
    assert list(loader.next_batch()["uid"]) == [0, 1, 3]


def test_every_prompt_too_long_is_an_error(tokenizer) -> None:  # type: ignore[no-untyped-def]
    import datasets

    dataset = datasets.Dataset.from_list([{"prompt": "add one and two"}])
    with pytest.raises(HfsdkError, match="raise the limit"):
        PromptLoader(dataset, tokenizer, DataConfig(max_prompt_length=2), seed=0)


def test_resume_continues_the_same_stream(tokenizer) -> None:  # type: ignore[no-untyped-def]
    import datasets

    ds = datasets.Dataset.from_list(ROWS * 3)
    config = DataConfig(batch_size=5, max_prompt_length=16, shuffle=True)
    straight = PromptLoader(ds, tokenizer, config, seed=7)
    expected = [list(straight.next_batch()["uid"]) for _ in range(4)]
    first = PromptLoader(ds, tokenizer, config, seed=7)
    got = [list(first.next_batch()["uid"]) for _ in range(2)]
    resumed = PromptLoader(ds, tokenizer, config, seed=7)
    resumed.load_state_dict(first.state_dict())
    got += [list(resumed.next_batch()["uid"]) for _ in range(2)]
    assert got == expected
    # an epoch (12 prompts) is a permutation: the first 12 draws cover every prompt once
    flat = [uid for batch in expected for uid in batch]
    assert sorted(flat[:12]) == list(range(12))
