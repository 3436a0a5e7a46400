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
    with pytest.raises(HfsdkError, match="has no column 'question'") as info:
        load_prompt_dataset([str(jsonl)], "question")
    # The loader's hidden data_dir is not shown as if it were the user's column.
    assert "(columns: ['prompt', 'answer']);" in str(info.value)
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


def test_seeds_draw_their_own_epoch_orders(tokenizer) -> None:  # type: ignore[no-untyped-def]
    import datasets

    ds = datasets.Dataset.from_list(ROWS * 6)
    config = DataConfig(batch_size=24, max_prompt_length=16, shuffle=True)

    def epochs(seed: int, state: dict[str, int] | None = None) -> list[list[int]]:
        loader = PromptLoader(ds, tokenizer, config, seed=seed)
        if state is not None:
            loader.load_state_dict(state)
        return [list(loader.next_batch()["uid"]) for _ in range(2)]

    # seed 1's first epoch is not seed 0's second (it was, with "seed + epoch").
    assert epochs(1)[0] != epochs(0)[1]
    # A checkpoint from before (no "order") resumes in the orders it was drawn in.
    legacy = epochs(1, {"epoch": 0, "index": 0})
    assert legacy[0] == epochs(0)[1] and legacy != epochs(1)
    assert epochs(1, {"epoch": 0, "index": 0, "order": 2}) == epochs(1)


def _saved_splits(path: Path, **splits: list[dict]) -> str:
    """A ``DatasetDict`` of ``splits`` saved at ``path`` (``save_to_disk``)."""
    import datasets

    parts = {name: datasets.Dataset.from_list(rows) for name, rows in splits.items()}
    datasets.DatasetDict(parts).save_to_disk(str(path))
    return str(path)


def test_a_saved_dataset_dict_gives_each_data_its_own_split(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    train, test = ROWS[:2], ROWS[3:]
    both = _saved_splits(tmp_path / "dd", train=train, test=test)
    with caplog.at_level("INFO"):
        assert load_prompt_dataset([both], "prompt")["prompt"] == [r["prompt"] for r in train]
        loaded = load_prompt_dataset([both], "prompt", validation=True)
    assert loaded["prompt"] == [r["prompt"] for r in test]  # not the training rows
    assert "using its 'test' split (of train, test) for the validation data" in caplog.text
    three = _saved_splits(tmp_path / "d3", train=train, validation=ROWS[2:3], test=test)
    assert load_prompt_dataset([three], "prompt", validation=True)["answer"] == ["six"]
    lone = _saved_splits(tmp_path / "lone", test=test)  # a lone split serves either data
    assert load_prompt_dataset([lone], "prompt")["answer"] == ["one"]
    no_train = _saved_splits(tmp_path / "nt", validation=ROWS[2:3], test=test)
    with pytest.raises(HfsdkError) as info:
        load_prompt_dataset([no_train], "prompt")
    assert str(info.value) == (
        f"dataset directory {no_train!r} holds the splits ['validation', 'test'] but no 'train' "
        "split for the training data; point data.train_files at "
        f"{no_train}/<split> (e.g. {no_train}/validation)"
    )
    no_val = _saved_splits(tmp_path / "nv", train=train, extra=test)
    with pytest.raises(HfsdkError, match=r"no 'validation' or 'test' split .* data\.val_files"):
        load_prompt_dataset([no_val], "prompt", validation=True)
    # the split's own folder is a dataset too
    assert load_prompt_dataset([no_val + "/extra"], "prompt", validation=True)["answer"] == ["one"]


def test_files_whose_column_types_differ_are_one_line(tmp_path: Path) -> None:
    text = _write_jsonl(tmp_path / "text.jsonl", [{"prompt": "add two", "answer": "2"}])
    number = _write_jsonl(tmp_path / "number.jsonl", [{"prompt": "add one", "answer": 3}])
    with pytest.raises(HfsdkError) as info:
        load_prompt_dataset([str(text), str(number)], "prompt")
    assert str(info.value) == (
        f"dataset files {str(text)!r} and {str(number)!r} give column 'answer' different types "
        "(string in the first, int64 in the second); give the column one type in every file "
        "(e.g. quote every value, or write every prompt as chat messages)"
    )
    chat = [{"prompt": [{"role": "user", "content": "add one"}], "answer": "2"}]
    messages = _write_jsonl(tmp_path / "chat.jsonl", chat)
    with pytest.raises(HfsdkError, match=r"column 'prompt' .*\(string in the first, list of obj"):
        load_prompt_dataset([str(text), str(messages)], "prompt")
    nested = [
        _write_jsonl(tmp_path / f"n{i}.jsonl", [{"prompt": "one", "reward_model": {"truth": v}}])
        for i, v in enumerate(["2", 2])
    ]
    with pytest.raises(HfsdkError, match=r"column 'reward_model\.truth' different types"):
        load_prompt_dataset([str(p) for p in nested], "prompt")
    # a column missing (or all null) in one file still joins
    loose = _write_jsonl(tmp_path / "loose.jsonl", [{"prompt": "one", "answer": None}])
    assert load_prompt_dataset([str(text), str(loose)], "prompt")["answer"] == ["2", None]


def test_large_and_plain_arrow_types_of_one_column_join(tmp_path: Path) -> None:
    """pandas 3 writes strings as large_string; before, joining such a parquet with a jsonl
    stopped with "different types (large_string in the first, string in the second)"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "prompt": pa.array(["add one"], pa.large_string()),
            "tags": pa.array([["a", "b"]], pa.large_list(pa.large_string())),
        }
    )
    pq.write_table(table, tmp_path / "large.parquet")
    plain = _write_jsonl(tmp_path / "plain.jsonl", [{"prompt": "add two", "tags": ["c"]}])
    for files in ([tmp_path / "large.parquet", plain], [plain, tmp_path / "large.parquet"]):
        joined = load_prompt_dataset([str(f) for f in files], "prompt")
        assert sorted(joined["prompt"]) == ["add one", "add two"]
        assert sorted(map(tuple, joined["tags"])) == [("a", "b"), ("c",)]


def test_a_null_typed_field_inside_a_list_of_records_joins_any_type(tmp_path: Path) -> None:
    """An image struct whose path is all null in one file and a string in another was refused
    with "list of objects {bytes, path} in the first, list of objects {bytes, path} in the
    second"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def image_file(name: str, path_type: pa.DataType, path: str | None) -> str:
        struct = pa.struct([("bytes", pa.binary()), ("path", path_type)])
        images = pa.array([[{"bytes": b"x", "path": path}]], pa.list_(struct))
        pq.write_table(pa.table({"prompt": ["<image> a"], "images": images}), tmp_path / name)
        return str(tmp_path / name)

    nulls = image_file("null.parquet", pa.null(), None)
    paths = image_file("str.parquet", pa.string(), "a.png")
    for files in ([nulls, paths], [paths, nulls]):
        joined = load_prompt_dataset(files, "prompt")
        assert sorted(str(row[0]["path"]) for row in joined["images"]) == ["None", "a.png"]


def test_files_with_different_columns_are_warned_about_once(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    import logging

    first = _write_jsonl(tmp_path / "a.jsonl", [{"prompt": "add one", "answer": "1"}])
    second = _write_jsonl(tmp_path / "b.jsonl", [{"prompt": "add two", "solution": "2"}])
    third = _write_jsonl(tmp_path / "c.jsonl", [{"prompt": "one", "answer": "1"}])
    with caplog.at_level(logging.WARNING):
        joined = load_prompt_dataset([str(first), str(second), str(third)], "prompt")
    assert joined["answer"] == ["1", None, "1"]  # joined (a column may be optional), but said
    warnings = [
        r.getMessage() for r in caplog.records if "differ in their columns" in r.getMessage()
    ]
    assert warnings == [
        f"dataset files differ in their columns: 'answer' is missing from {str(second)!r}; "
        f"'solution' is missing from {str(first)!r}, {str(third)!r}; those rows get None "
        "there (check the column names if that is not meant)"
    ]


def test_columns_the_loader_writes_are_refused(tokenizer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import datasets

    rows = [{"prompt": "add two", "uid": "q-17", "raw_prompt": "mine"}]
    with pytest.raises(HfsdkError) as info:
        PromptLoader(datasets.Dataset.from_list(rows), tokenizer, DataConfig(), seed=0)
    assert str(info.value) == (
        "the training data has the column(s) 'uid', 'raw_prompt', which the loader writes "
        "itself (reserved: uid, raw_prompt, prompt_messages, rendered_prompt, data_dir); rename "
        "them in "
        "the data (e.g. 'source_uid')"
    )
    rows = [{"prompt": "add two", "rendered_prompt": "x"}]
    with pytest.raises(HfsdkError, match=r"validation data \(data\.val_files: v\.jsonl\) .*"):
        PromptLoader(
            datasets.Dataset.from_list(rows),
            tokenizer,
            DataConfig(),
            seed=0,
            validation=True,
            files=["v.jsonl"],
        )


def test_a_files_own_data_dir_column_is_refused(tmp_path: Path) -> None:
    import datasets

    # It was taken for the image folder and hidden from reward functions without a word.
    rows = [{"prompt": "add two", "answer": "2", "data_dir": "mine"}]
    jsonl = _write_jsonl(tmp_path / "d.jsonl", rows)
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    for source, validation, key in ((jsonl, False, "train"), (tmp_path / "saved", True, "val")):
        with pytest.raises(HfsdkError) as info:
            load_prompt_dataset([str(source)], "prompt", validation=validation)
        assert str(info.value) == (
            f"the {'validation' if validation else 'training'} data (data.{key}_files: "
            f"{source}) has the column(s) 'data_dir', which the loader writes itself (reserved: "
            "uid, raw_prompt, prompt_messages, rendered_prompt, data_dir); rename them in the "
            "data (e.g. 'source_data_dir')"
        )


def test_the_loaders_own_data_dir_passes_the_reserved_check(tokenizer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    jsonl = _write_jsonl(tmp_path / "p.jsonl", ROWS[:2])
    dataset = load_prompt_dataset([str(jsonl)], "prompt")
    loader = PromptLoader(dataset, tokenizer, DataConfig(), seed=0)
    assert {row["data_dir"] for row in loader.rows} == {str(tmp_path.resolve())}


def test_a_prompt_drawn_twice_in_a_batch_is_two_groups(tokenizer, caplog) -> None:  # type: ignore[no-untyped-def]
    import datasets

    five = [{"prompt": "add " + " ".join(["one"] * i)} for i in range(1, 6)]
    config = DataConfig(batch_size=4, max_prompt_length=16, shuffle=True)
    straight = PromptLoader(datasets.Dataset.from_list(five), tokenizer, config, seed=0)
    batches = [list(straight.next_batch()["uid"]) for _ in range(6)]
    repeats = 0
    for batch in batches:
        assert len(set(batch)) == len(batch), batches  # one group per draw
        # a first draw keeps the row's index; a repeat is that row of a later epoch
        firsts = [str(uid) for uid in batch if str(uid).isdigit()]
        for uid in (str(uid) for uid in batch if not str(uid).isdigit()):
            row, _, epoch = uid.partition("@epoch")
            assert row in firsts and int(epoch) >= 1, batches
            repeats += 1
    assert repeats > 0, batches  # the stream does cross epochs mid-batch
    assert [str(u) for u in batches[0]] == ["4", "0", "1", "3"]  # no repeat: as before
    # the same ids after a resume from any step
    for step in range(1, 6):
        first = PromptLoader(datasets.Dataset.from_list(five), tokenizer, config, seed=0)
        for _ in range(step):
            first.next_batch()
        resumed = PromptLoader(datasets.Dataset.from_list(five), tokenizer, config, seed=0)
        resumed.load_state_dict(first.state_dict())
        assert [list(resumed.next_batch()["uid"]) for _ in range(6 - step)] == batches[step:]


def test_a_batch_larger_than_the_data_is_warned_about(tokenizer, caplog) -> None:  # type: ignore[no-untyped-def]
    import datasets

    config = DataConfig(batch_size=5, max_prompt_length=16, shuffle=False)
    with caplog.at_level("WARNING"):
        loader = PromptLoader(datasets.Dataset.from_list(ROWS[:2]), tokenizer, config, seed=0)
        assert caplog.text == ""  # loading alone draws no batch
        assert list(loader.next_batch()["uid"]) == [0, 1, "0@epoch1", "1@epoch1", "0@epoch2"]
        loader.next_batch()
        loader.next_batch(1)
    assert caplog.text.count("data.batch_size=5 is more than the 2 prompt(s) of the training") == 1
    caplog.clear()
    with caplog.at_level("WARNING"):  # an algorithm's own draw (DAPO's rounds)
        PromptLoader(datasets.Dataset.from_list(ROWS[:2]), tokenizer, config, seed=0).next_batch(3)
    assert "a draw of 3 prompts is more than the 2 prompt(s)" in caplog.text


def test_length_messages_name_the_data_and_files(tokenizer, caplog) -> None:  # type: ignore[no-untyped-def]
    import datasets

    config = DataConfig(max_prompt_length=2, shuffle=False)
    with pytest.raises(HfsdkError) as info:
        PromptLoader(
            datasets.Dataset.from_list(ROWS[:1]),
            tokenizer,
            config,
            seed=0,
            validation=True,
            files=["v.jsonl"],
        )
    assert str(info.value) == (
        "every prompt of the validation data (data.val_files: v.jsonl) is longer than "
        "data.max_prompt_length=2 tokens; raise the limit"
    )
    with caplog.at_level("WARNING"):
        PromptLoader(datasets.Dataset.from_list(ROWS), tokenizer, config, seed=0, files=["a.jsonl"])
    assert (
        "dropped 2 of 4 prompts longer than data.max_prompt_length=2 tokens from the training "
        "data (data.train_files: a.jsonl)"
    ) in caplog.text


def _word_tokenizer(bos: bool, dropped: str = ""):  # type: ignore[no-untyped-def]
    """A word-level tokenizer that adds ``<s>`` when ``bos`` and deletes ``dropped`` text."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<unk>", "<s>", "one", "two"]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    if dropped:
        raw.normalizer = normalizers.Replace(dropped, "")
    if bos:
        raw.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", 2)]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>", bos_token="<s>"
    )


@pytest.mark.parametrize("bos", [False, True])
@pytest.mark.parametrize("prompt", ["", "   ", [{"role": "user", "content": " "}]])
def test_a_blank_prompt_is_a_one_line_error_naming_its_row(bos: bool, prompt: object) -> None:
    # Before: without a BOS it became an all-padding row, sampled from and trained on silently.
    import datasets

    rows = [{"prompt": prompt}, {"prompt": "one" if isinstance(prompt, str) else [
        {"role": "user", "content": "one"}
    ]}]  # fmt: skip
    config = DataConfig(batch_size=2, shuffle=False, apply_chat_template=False)
    with pytest.raises(HfsdkError, match=r"^row 0 of column 'prompt' is blank") as info:
        PromptLoader(datasets.Dataset.from_list(rows), _word_tokenizer(bos), config, seed=0)
    assert "\n" not in str(info.value) and "remove the row" in str(info.value)


def test_a_prompt_that_tokenizes_to_no_tokens_is_a_one_line_error() -> None:
    import datasets

    rows = [{"prompt": "one"}, {"prompt": "~~"}]
    config = DataConfig(batch_size=2, shuffle=False)
    with pytest.raises(HfsdkError, match=r"^row 1 of column 'prompt' \('~~'\) tokenizes to no"):
        PromptLoader(datasets.Dataset.from_list(rows), _word_tokenizer(False, "~"), config, seed=0)


def test_a_missing_file_names_where_it_was_given(tmp_path: Path) -> None:
    """`hfsdk data inspect nope.parquet` said "check data.train_files" of a command-line path."""
    missing = str(tmp_path / "nope.jsonl")
    with pytest.raises(HfsdkError, match=r"does not exist; check data\.train_files$"):
        load_prompt_dataset([missing], "prompt")
    with pytest.raises(HfsdkError) as info:
        load_prompt_dataset([missing], "prompt", source="the FILE arguments")
    assert str(info.value) == f"dataset file {missing!r} does not exist; check the FILE arguments"


def test_a_missing_relative_path_names_the_directory_it_resolves_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: "dataset file 'd.jsonl' does not exist" left users looking beside the config
    file; a relative path resolves from the working directory, which the message names."""
    import os

    monkeypatch.chdir(tmp_path)
    with pytest.raises(HfsdkError) as info:
        load_prompt_dataset(["d.jsonl"], "prompt")
    assert str(info.value) == (
        f"dataset file 'd.jsonl' does not exist (relative to the working directory "
        f"{os.getcwd()}); check data.train_files"
    )
    absolute = str(tmp_path / "d.jsonl")  # an absolute path needs no directory named
    with pytest.raises(HfsdkError) as info:
        load_prompt_dataset([absolute], "prompt")
    assert str(info.value) == f"dataset file {absolute!r} does not exist; check data.train_files"


def test_a_path_that_is_not_a_regular_file_says_so(tmp_path: Path) -> None:
    """A FIFO (or a device) was reported as a file that "does not exist"."""
    import os

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    device = tmp_path / "null.jsonl"
    device.symlink_to("/dev/null")
    for path, kind in ((fifo, "a FIFO"), (device, "a device")):
        with pytest.raises(HfsdkError) as info:
            load_prompt_dataset([str(path)], "prompt")
        assert str(info.value) == (
            f"dataset file {str(path)!r} is not a regular file ({kind}); expected a .jsonl, "
            ".json or .parquet file or a saved dataset directory; write the prompts to a "
            "file and check data.train_files"
        )
