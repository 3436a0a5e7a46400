"""Preference pairs: both layouts (explicit/implicit prompt), both forms (text/messages), the batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk_supervised_data.preference_pairs import (
    PairColumns,
    chosen_rows,
    collate_preference_pairs,
    load_preference_pairs,
    rejected_rows,
    split_prompt,
    tokenize_preference_pair,
)

USER = {"role": "user", "content": "add one two"}


def _words(tok, ids) -> list[str]:  # type: ignore[no-untyped-def]
    return tok.convert_ids_to_tokens(list(ids))


def test_explicit_prompt_text_pair(make_tokenizer) -> None:
    tok = make_tokenizer(None)
    pair = tokenize_preference_pair(
        {"prompt": "add one two", "chosen": "three", "rejected": "four", "id": 7},
        tok,
        use_template=False,
    )
    assert pair.chosen.prompt_ids == pair.rejected.prompt_ids
    assert _words(tok, pair.chosen.response_ids) == ["three", "</s>"]
    assert _words(tok, pair.rejected.response_ids) == ["four", "</s>"]
    assert dict(pair.row) == {"id": 7}


def test_explicit_prompt_messages_pair_trl_layout(make_tokenizer) -> None:
    tok = make_tokenizer()
    row = {
        "prompt": [USER],
        "chosen": [{"role": "assistant", "content": "three"}],
        "rejected": [{"role": "assistant", "content": "four"}],
    }
    pair = tokenize_preference_pair(row, tok, use_template=True)
    assert _words(tok, pair.chosen.prompt_ids)[-1] == "<|assistant|>"
    assert _words(tok, pair.chosen.response_ids) == ["three", "<|end|>", "</s>"]
    assert _words(tok, pair.rejected.response_ids) == ["four", "<|end|>", "</s>"]


def test_implicit_prompt_messages_take_the_shared_leading_messages(make_tokenizer) -> None:
    tok = make_tokenizer()
    row = {
        "chosen": [USER, {"role": "assistant", "content": "three"}],
        "rejected": [USER, {"role": "assistant", "content": "four"}],
    }
    prompt, chosen, rejected = split_prompt(row)
    assert prompt == [USER]
    assert chosen == [{"role": "assistant", "content": "three"}]
    explicit = tokenize_preference_pair(
        {"prompt": [USER], "chosen": chosen, "rejected": rejected}, tok, use_template=True
    )
    assert tokenize_preference_pair(row, tok, use_template=True) == explicit


def test_a_text_prompt_with_whole_conversations_drops_their_shared_start(make_tokenizer) -> None:
    # HuggingFaceH4/ultrafeedback_binarized: a text prompt, and chosen/rejected that repeat it
    # as their first (user) message. Before: trained as "user Q, user Q, assistant A".
    tok = make_tokenizer()
    three = {"role": "assistant", "content": "three"}
    four = {"role": "assistant", "content": "four"}
    row = {"prompt": "add one two", "chosen": [USER, three], "rejected": [USER, four]}
    assert split_prompt(row) == ("add one two", [three], [four])
    pair = tokenize_preference_pair(row, tok, use_template=True)
    assert _words(tok, pair.chosen.prompt_ids).count("<|user|>") == 1
    assert pair == tokenize_preference_pair(
        {"prompt": "add one two", "chosen": [three], "rejected": [four]}, tok, use_template=True
    )
    # A messages prompt: the same leading messages are dropped too.
    system = {"role": "system", "content": "be brief"}
    rows = {"prompt": [system, USER], "chosen": [system, USER, three], "rejected": [four]}
    assert split_prompt(rows) == ([system, USER], [three], [four])


@pytest.mark.parametrize(
    ("prompt", "chosen_start"),
    [
        ("add one two", [{"role": "user", "content": "add two"}]),
        ([USER], [{"role": "system", "content": "be brief"}, USER]),
    ],
)
def test_responses_that_start_another_conversation_than_the_prompt_are_refused(
    prompt, chosen_start
) -> None:  # type: ignore[no-untyped-def]
    three = {"role": "assistant", "content": "three"}
    row = {"prompt": prompt, "chosen": [*chosen_start, three], "rejected": [three, three]}
    with pytest.raises(HfsdkError, match="row 5: 'chosen' starts with a conversation") as info:
        split_prompt(row, where="row 5")
    assert "\n" not in str(info.value)


def test_implicit_prompt_messages_whose_responses_start_a_conversation_are_refused() -> None:
    # Before: a shared system message alone was taken as the prompt, and each "response"
    # began with its own user turn, so the pair ranked two answers to different questions.
    system = {"role": "system", "content": "be brief"}
    row = {
        "chosen": [system, USER, {"role": "assistant", "content": "three"}],
        "rejected": [
            system,
            {"role": "user", "content": "add two"},
            {"role": "assistant", "content": "four"},
        ],
    }
    with pytest.raises(HfsdkError, match="row 5: 'chosen' and 'rejected' share only") as info:
        split_prompt(row, where="row 5")
    assert "\n" not in str(info.value)
    assert "add a 'prompt' column" in str(info.value)


def test_implicit_prompt_text_is_cut_at_a_word_boundary() -> None:
    prompt, chosen, rejected = split_prompt(
        {"chosen": "add one two three", "rejected": "add one two two"}
    )
    # The texts share "add one two t"; the prompt stops before the shared "t" of a word, and
    # the space before it starts the responses (as TRL's extract_prompt splits).
    assert (prompt, chosen, rejected) == ("add one two", " three", " two")


@pytest.mark.parametrize(
    ("chosen", "rejected", "split"),
    [
        ("Q: 7+5= A: 12", "Q: 7+5= A: 1", ("Q: 7+5= A:", " 12", " 1")),
        ("Q: 2+2= A: 4", "Q: 2+2= A: 4.5", ("Q: 2+2= A:", " 4", " 4.5")),
    ],
)
def test_implicit_prompt_text_is_cut_at_a_word_boundary_when_one_is_a_prefix(
    chosen: str, rejected: str, split: tuple[str, str, str]
) -> None:
    # Before: refused ("one is a prefix of the other") though a whitespace cut exists.
    assert split_prompt({"chosen": chosen, "rejected": rejected}) == split


def test_implicit_prompt_text_without_whitespace_before_the_difference_is_refused() -> None:
    with pytest.raises(HfsdkError, match="add a 'prompt' column"):
        split_prompt({"chosen": "12", "rejected": "1"})


def test_implicit_prompt_text_ids_are_the_whole_texts_ids_with_a_byte_level_bpe() -> None:
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    row = {
        "chosen": "Please add the numbers with the calculator",
        "rejected": "Please add the numbers with the tool",
    }
    pair = tokenize_preference_pair(row, tok, use_template=False, append_eos=False)
    for side, text in ((pair.chosen, row["chosen"]), (pair.rejected, row["rejected"])):
        whole = tok(text, add_special_tokens=False).input_ids
        # No lone trailing-space token in the prompt, no space-less first response word.
        assert list(side.prompt_ids) + list(side.response_ids) == whole


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "add numbers",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]


@pytest.mark.parametrize("form", ["list", "json"])
def test_a_rows_tools_reach_the_chat_template_of_both_responses(form: str) -> None:
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    call = {"type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
    row = {
        "prompt": [{"role": "user", "content": "add 2 and 3"}],
        "chosen": [{"role": "assistant", "content": None, "tool_calls": [call]}],
        "rejected": [{"role": "assistant", "content": "6"}],
        "tools": TOOLS if form == "list" else json.dumps(TOOLS),
    }
    pair = tokenize_preference_pair(row, tok, use_template=True)
    # Before: the tools column was never given to the template (SFT's rows had them).
    assert "add numbers" in tok.decode(pair.chosen.prompt_ids)
    assert pair.chosen.prompt_ids == pair.rejected.prompt_ids
    renamed = {("schemas" if k == "tools" else k): v for k, v in row.items()}
    columns = PairColumns(tools="schemas")
    other = tokenize_preference_pair(renamed, tok, use_template=True, columns=columns)
    assert (other.chosen, other.rejected) == (pair.chosen, pair.rejected)
    with pytest.raises(HfsdkError, match=r"row, column 'tools' is 3; expected a list of tool"):
        tokenize_preference_pair({**row, "tools": 3}, tok, use_template=True)


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ({"prompt": "add", "chosen": "one"}, "no 'rejected'"),
        (
            {"prompt": "add", "chosen": "one", "rejected": [{"role": "assistant", "content": "x"}]},
            "differ in form",
        ),
        ({"chosen": "add one", "rejected": "two one"}, "add a 'prompt' column"),
        (
            {"chosen": [USER], "rejected": [USER, {"role": "assistant", "content": "x"}]},
            "share 1 of 1/2",
        ),
        # Before: trained on (no gradient, counted as misranked), or "add a '' column".
        ({"chosen": [USER], "rejected": [USER]}, "are the same response"),
        ({"prompt": "add", "chosen": "one", "rejected": "one"}, "are the same response"),
        ({"prompt": "add", "chosen": "one", "rejected": " one "}, "tokenize to the same"),
        ({"prompt": "add", "chosen": 3, "rejected": "one"}, "column 'chosen'"),
    ],
)
def test_malformed_rows_are_one_line_errors(row, needle, make_tokenizer) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HfsdkError, match=needle) as info:
        tokenize_preference_pair(row, make_tokenizer(None), use_template=False, where="row 4")
    assert "\n" not in str(info.value)


def test_collate_interleaves_chosen_and_rejected(make_tokenizer) -> None:
    tok = make_tokenizer(None)
    pairs = [
        tokenize_preference_pair(
            {"prompt": "add one two", "chosen": "three", "rejected": "four four", "k": "a"},
            tok, use_template=False,
        ),
        tokenize_preference_pair(
            {"prompt": "add", "chosen": "one", "rejected": "two", "k": "b"},
            tok, use_template=False,
        ),
    ]  # fmt: skip
    batch = collate_preference_pairs(pairs, tok.pad_token_id)
    assert len(batch) == 4 and batch.meta["pairs"] == 2
    assert batch["pair_index"].tolist() == [0, 0, 1, 1]
    assert batch["chosen"].tolist() == [1, 0, 1, 0]
    assert list(batch["k"]) == ["a", "a", "b", "b"]
    responses = batch["responses"]
    assert _words(tok, chosen_rows(responses)[0][:2]) == ["three", "</s>"]
    assert _words(tok, rejected_rows(responses)[0]) == ["four", "four", "</s>"]
    assert batch["response_mask"].tolist() == [[1, 1, 0], [1, 1, 1], [1, 1, 0], [1, 1, 0]]
    # Both rows of a pair have the same prompt ids (left-padded to one width).
    assert batch["prompts"][0].tolist() == batch["prompts"][1].tolist()
    # A contiguous even split keeps pairs together.
    for part in batch.chunk(2):
        assert part["pair_index"][0] == part["pair_index"][1]


def test_load_from_jsonl_with_custom_columns_and_length_limit(
    tmp_path: Path, caplog, make_tokenizer
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "pairs.jsonl"
    rows = [
        {"q": "add one", "good": "two", "bad": "three"},
        {"q": "add one two", "good": "three", "bad": "four one two three four"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    columns = PairColumns(prompt="q", chosen="good", rejected="bad")
    pairs = load_preference_pairs([str(path)], make_tokenizer(None), columns=columns, max_length=6)
    assert len(pairs) == 1  # the second is 3 + 6 tokens long
    assert "dropped 1 of 2" in caplog.text
    with pytest.raises(HfsdkError, match="no column 'rejected'"):
        load_preference_pairs([str(path)], make_tokenizer(None), columns=PairColumns(chosen="good"))
