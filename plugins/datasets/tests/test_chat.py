"""Chat-format prompts: checking, plain rendering, chat templates and verl's parquet layout."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from hfsdk import DataConfig, HfsdkError
from hfsdk_datasets import prompt_dataset
from hfsdk_datasets.chat import (
    check_messages,
    check_tools,
    is_messages,
    plain_rendering,
    render_prompt,
)
from hfsdk_datasets.columns import lift_nested, reward_column_names
from hfsdk_datasets.prompt_dataset import PromptLoader, load_prompt_dataset

TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _tokenizer(template: str | None = None):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<unk>", "<s>", "add", "one", "two", "be", "brief", "user:", "system:"]
    words += ["assistant:", "<|user|>", "<|system|>", "<|assistant|>"]
    raw = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>", name_or_path="t"
    )
    tokenizer.chat_template = template
    return tokenizer


USER = [{"role": "user", "content": "add one two"}]
SYSTEM_USER = [{"role": "system", "content": "be brief"}, *USER]


def test_is_messages_tells_strings_from_message_lists() -> None:
    import numpy as np

    assert is_messages(USER)
    assert is_messages(np.array(USER, dtype=object))
    assert not is_messages("add one")
    assert not is_messages({"role": "user"})
    assert not is_messages([])


def test_plain_rendering_lone_user_message_is_its_content() -> None:
    assert plain_rendering(USER) == "add one two"
    assert plain_rendering(SYSTEM_USER) == "system: be brief\nuser: add one two\nassistant:"


def test_parquet_nones_are_dropped_from_messages() -> None:
    cell = [{"role": "user", "content": "add", "tool_calls": None}]
    assert check_messages(cell, "row 0") == [{"role": "user", "content": "add"}]


@pytest.mark.parametrize(
    ("cell", "needle"),
    [
        ([{"role": "user"}], "message 0 (user) has no text 'content'"),
        ([{"content": "add"}], "message 0 has no 'role'"),
        ([{"role": "user", "content": None}], "has no text 'content'"),
        (["add one"], "message 0 is 'add one'; expected a dict"),
        ([], "expected a string or a non-empty list of messages"),
        (42, "expected a string or a non-empty list of messages"),
    ],
)
def test_malformed_messages_are_one_line_errors(cell: object, needle: str) -> None:
    with pytest.raises(HfsdkError, match="row 3 of column 'prompt'") as info:
        check_messages(cell, "row 3 of column 'prompt'")
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_chat_template_gets_the_messages_and_a_generation_prompt() -> None:
    tokenizer = _tokenizer(TEMPLATE)
    text = render_prompt(SYSTEM_USER, tokenizer, True)
    assert text == "<|system|> be brief <|user|> add one two <|assistant|>"
    # A plain-string prompt with a template becomes one user message.
    assert render_prompt("add one", tokenizer, True) == "<|user|> add one <|assistant|>"


def _verl_rows() -> list[dict]:
    return [
        {
            "data_source": "toy",
            "prompt": USER,
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "three"},
            "extra_info": {"index": 0},
        },
        {
            "data_source": "toy",
            "prompt": SYSTEM_USER,
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "three"},
            "extra_info": {"index": 1},
        },
    ]


def _verl_parquet(tmp_path: Path) -> Path:
    import datasets

    path = tmp_path / "verl.parquet"
    datasets.Dataset.from_list(_verl_rows()).to_parquet(str(path))
    return path


def test_verl_parquet_loads_with_ground_truth_lifted(tmp_path: Path) -> None:
    dataset = load_prompt_dataset([str(_verl_parquet(tmp_path))], "prompt")
    loader = PromptLoader(dataset, _tokenizer(TEMPLATE), DataConfig(shuffle=False), seed=0)
    batch = loader.collate([0, 1])
    assert list(batch["ground_truth"]) == ["three", "three"]
    assert list(batch["data_source"]) == ["toy", "toy"]
    assert batch["extra_info"][1] == {"index": 1}
    assert list(batch["raw_prompt"]) == ["add one two", plain_rendering(SYSTEM_USER)]
    assert batch["prompt_messages"][1] == SYSTEM_USER
    assert batch["rendered_prompt"][0] == "<|user|> add one two <|assistant|>"
    # The template's text is tokenised without extra special tokens.
    assert (
        loader.token_ids[0]
        == _tokenizer(TEMPLATE)("<|user|> add one two <|assistant|>", add_special_tokens=False)[
            "input_ids"
        ]
    )
    assert reward_column_names(loader.rows[0]) == [
        "ability", "data_source", "extra_info", "ground_truth", "prompt", "reward_model", "uid"
    ]  # fmt: skip


def test_an_existing_ground_truth_column_wins() -> None:
    row = {"ground_truth": "mine", "reward_model": {"ground_truth": "nested"}}
    assert lift_nested(row)["ground_truth"] == "mine"
    # A reward_model column gives every row a ground_truth: None where it holds none.
    assert lift_nested({"reward_model": {"style": "model"}})["ground_truth"] is None
    assert lift_nested({"reward_model": None})["ground_truth"] is None
    assert "ground_truth" not in lift_nested({"prompt": "add one"})
    # A top-level None (another file had the column) takes the nested value.
    assert lift_nested({"ground_truth": None, "reward_model": {"ground_truth": "2"}}) == {
        "ground_truth": "2",
        "reward_model": {"ground_truth": "2"},
    }


def test_rows_without_a_nested_ground_truth_still_collate(tmp_path: Path) -> None:
    """Before: only rows holding reward_model.ground_truth got the column, so a batch
    stopped with "batch key 'ground_truth' has 1 rows but the batch has 2"."""
    import json

    rows = [
        {"prompt": "add one", "reward_model": {"style": "rule"}},
        {"prompt": "add two", "reward_model": {"style": "rule", "ground_truth": "2"}},
    ]
    path = tmp_path / "gt.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    top = tmp_path / "top.jsonl"
    top.write_text(json.dumps({"prompt": "add one two", "ground_truth": "3"}) + "\n")
    for files, truths in (([path], [None, "2"]), ([path, top], [None, "2", "3"])):
        dataset = load_prompt_dataset([str(f) for f in files], "prompt")
        loader = PromptLoader(dataset, _tokenizer(None), DataConfig(shuffle=False), seed=0)
        assert list(loader.whole()["ground_truth"]) == truths


def test_plain_rendering_is_announced_once(tmp_path: Path, caplog, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(prompt_dataset, "_PLAIN_RENDERING_LOGGED", set())
    dataset = load_prompt_dataset([str(_verl_parquet(tmp_path))], "prompt")
    tokenizer = _tokenizer(None)
    with caplog.at_level(logging.WARNING):
        loader = PromptLoader(dataset, tokenizer, DataConfig(shuffle=False), seed=0)
        PromptLoader(dataset, tokenizer, DataConfig(shuffle=False), seed=0)
    notices = [r for r in caplog.records if "no chat template" in r.getMessage()]
    assert len(notices) == 1
    assert loader.rows[0]["rendered_prompt"] == "add one two"
    assert loader.rows[1]["rendered_prompt"] == "system: be brief\nuser: add one two\nassistant:"


def test_template_asked_for_but_missing_is_an_error(tmp_path: Path) -> None:
    dataset = load_prompt_dataset([str(_verl_parquet(tmp_path))], "prompt")
    with pytest.raises(HfsdkError, match="has no chat template"):
        PromptLoader(dataset, _tokenizer(None), DataConfig(apply_chat_template=True), seed=0)


def test_a_bad_row_names_its_index(tmp_path: Path) -> None:
    import datasets

    rows = [{"prompt": USER}, {"prompt": [{"role": "user", "text": "add"}]}]
    path = tmp_path / "bad.jsonl"
    datasets.Dataset.from_list(rows).to_json(str(path))
    dataset = load_prompt_dataset([str(path)], "prompt")
    with pytest.raises(HfsdkError, match=r"row 1 of column 'prompt': message 0 \(user\) has no"):
        PromptLoader(dataset, _tokenizer(None), DataConfig(), seed=0)


def test_tool_call_turns_in_openai_form_get_the_template_form() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    flat = {"name": "add", "arguments": {"a": 1}}
    for calls in ([call], [flat]):
        messages = check_messages(
            [
                {"role": "user", "content": "1+1"},
                {"role": "assistant", "content": None, "tool_calls": calls},
            ],
            "row 0",
        )
        assert messages[1]["content"] == ""
        assert messages[1]["tool_calls"][0]["function"] == {"name": "add", "arguments": {"a": 1}}
    assert check_tools('[{"type": "function", "function": {"name": "add"}}]', "t") == [
        {"type": "function", "function": {"name": "add"}}
    ]
    assert check_tools(None, "t") == []


@pytest.mark.parametrize(
    ("calls", "needle"),
    [
        ("add", " has tool_calls 'add'; expected"),
        ([{"function": {"arguments": "{}"}}], " has a tool call without a function name"),
        (
            [{"function": {"name": "add", "arguments": "{oops"}}],
            ": the arguments of tool call 'add' are not JSON",
        ),
        (
            [{"function": {"name": "add", "arguments": "[1]"}}],
            ": the arguments of tool call 'add' are [1]; expected",
        ),
    ],
)
def test_malformed_tool_calls_are_one_line_errors(calls: object, needle: str) -> None:
    cell = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]
    with pytest.raises(HfsdkError, match=re.escape(f"row 2: message 1{needle}")):
        check_messages(cell, "row 2")


def test_tool_calls_a_plain_rendering_would_drop_are_refused(tmp_path: Path) -> None:
    import datasets

    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    prompt = [*USER, {"role": "assistant", "content": None, "tool_calls": [call]}]
    path = tmp_path / "calls.jsonl"
    datasets.Dataset.from_list([{"prompt": USER}, {"prompt": prompt}]).to_json(str(path))
    dataset = load_prompt_dataset([str(path)], "prompt")
    with pytest.raises(HfsdkError, match=r"row 1 of column 'prompt' has assistant tool calls"):
        PromptLoader(dataset, _tokenizer(None), DataConfig(), seed=0)


def test_a_template_that_refuses_a_row_is_a_one_line_error_naming_it(tmp_path: Path) -> None:
    import datasets

    # As Mistral-style templates do for roles they do not take.
    refusing = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system turns') }}"
    refusing += "{% endif %}" + TEMPLATE
    path = tmp_path / "system.jsonl"
    datasets.Dataset.from_list([{"prompt": USER}, {"prompt": SYSTEM_USER}]).to_json(str(path))
    dataset = load_prompt_dataset([str(path)], "prompt")
    with pytest.raises(HfsdkError, match=r"^row 1 of column 'prompt': the chat template refused"):
        PromptLoader(dataset, _tokenizer(refusing), DataConfig(), seed=0)


def test_the_plain_rendering_notice_says_its_real_cause(
    tmp_path: Path, caplog, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(prompt_dataset, "_PLAIN_RENDERING_LOGGED", set())
    dataset = load_prompt_dataset([str(_verl_parquet(tmp_path))], "prompt")
    config = DataConfig(shuffle=False, apply_chat_template=False)
    with caplog.at_level(logging.WARNING):
        PromptLoader(dataset, _tokenizer(TEMPLATE), config, seed=0)
    notices = [r.getMessage() for r in caplog.records if "plain rendering" in r.getMessage()]
    assert len(notices) == 1 and notices[0].startswith("data.apply_chat_template=false: chat ")
    assert "no chat template" not in caplog.text  # the tokenizer has one
    assert prompt_dataset.plain_rendering_cause(_tokenizer(None)) == (
        "the tokenizer has no chat template"
    )


BOS_TEMPLATE = "{{ bos_token }} {% for m in messages %}{{ m['content'] }} {% endfor %}"
"""A template that starts with BOS and shows a user message as its content (as t1's)."""


def _bos_tokenizer(template: str | None):  # type: ignore[no-untyped-def]
    """:func:`_tokenizer` with ``<s>`` as BOS, added by the template or by the tokenizer."""
    from tokenizers import processors

    tokenizer = _tokenizer(template)
    tokenizer.bos_token = "<s>"
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tokenizer.convert_tokens_to_ids("<s>"))]
    )
    return tokenizer


@pytest.mark.parametrize(
    ("template", "setting", "adder"),
    [(BOS_TEMPLATE, None, "chat template"), (BOS_TEMPLATE, False, "tokenizer")],
)
def test_a_prompt_starting_with_bos_text_is_warned_about_once(  # type: ignore[no-untyped-def]
    template, setting, adder, caplog, monkeypatch
) -> None:
    import datasets

    monkeypatch.setattr(prompt_dataset, "_DOUBLE_BOS_LOGGED", set(), raising=False)
    rows = [{"prompt": "add one"}, {"prompt": "<s> add two"}, {"prompt": "<s> add one two"}]
    tokenizer = _bos_tokenizer(template)
    config = DataConfig(shuffle=False, apply_chat_template=setting)
    with caplog.at_level(logging.WARNING):
        loader = PromptLoader(datasets.Dataset.from_list(rows), tokenizer, config, seed=0)
    bos = tokenizer.bos_token_id
    assert loader.token_ids[0][:2] != [bos, bos] and loader.token_ids[1][:2] == [bos, bos]
    warnings = [r.getMessage() for r in caplog.records if "BOS" in r.getMessage()]
    assert warnings == [
        f"row 1 of column 'prompt' starts with the BOS token '<s>' and the {adder} adds BOS "
        "again: the model sees two BOS tokens; remove the leading '<s>' from the prompts"
    ]


def test_a_bos_after_the_templates_role_tokens_is_warned_about(caplog, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Before: only ``[BOS, BOS, ...]`` was warned about, but real templates put role tokens
    between the template's BOS and the prompt's own."""
    import datasets

    monkeypatch.setattr(prompt_dataset, "_DOUBLE_BOS_LOGGED", set(), raising=False)
    tokenizer = _bos_tokenizer("{{ bos_token }} " + TEMPLATE)
    rows = [{"prompt": "<s> add one"}]
    with caplog.at_level(logging.WARNING):
        loader = PromptLoader(datasets.Dataset.from_list(rows), tokenizer, DataConfig(), seed=0)
    bos = tokenizer.bos_token_id
    assert loader.token_ids[0][:3] == [bos, tokenizer.convert_tokens_to_ids("<|user|>"), bos]
    warnings = [r.getMessage() for r in caplog.records if "BOS" in r.getMessage()]
    assert warnings == [
        "row 0 of column 'prompt' starts with the BOS token '<s>' and the chat template adds "
        "BOS again: the model sees two BOS tokens; remove the leading '<s>' from the prompts"
    ]


@pytest.mark.parametrize("adds_bos", [False, True])
def test_a_multi_turn_prompt_with_one_bos_per_turn_is_warned_about_only_if_bos_is_added(  # type: ignore[no-untyped-def]
    adds_bos, caplog, monkeypatch
) -> None:
    """Before: every BOS id was counted, so a pre-rendered Llama-2 multi-turn prompt (one
    ``<s>`` per turn) under a tokenizer adding no BOS was told to drop its only leading BOS."""
    import datasets

    monkeypatch.setattr(prompt_dataset, "_DOUBLE_BOS_LOGGED", set(), raising=False)
    if adds_bos:
        tokenizer = _bos_tokenizer(None)
    else:
        tokenizer = _tokenizer(None)
        tokenizer.bos_token = "<s>"
    rows = [{"prompt": "<s> add one two <s> add two"}]
    config = DataConfig(shuffle=False, apply_chat_template=False)
    with caplog.at_level(logging.WARNING):
        loader = PromptLoader(datasets.Dataset.from_list(rows), tokenizer, config, seed=0)
    assert loader.token_ids[0].count(tokenizer.bos_token_id) == (3 if adds_bos else 2)
    warnings = [r.getMessage() for r in caplog.records if "BOS" in r.getMessage()]
    assert warnings == (
        [
            "row 0 of column 'prompt' starts with the BOS token '<s>' and the tokenizer adds "
            "BOS again: the model sees two BOS tokens; remove the leading '<s>' from the prompts"
        ]
        if adds_bos
        else []
    )


@pytest.mark.parametrize(("setting", "warned"), [(False, True), (None, False)])
def test_a_tokenizer_appending_eos_is_warned_about_once(  # type: ignore[no-untyped-def]
    setting, warned, caplog, monkeypatch
) -> None:
    import datasets
    from tokenizers import processors

    monkeypatch.setattr(prompt_dataset, "_APPENDED_EOS_LOGGED", set(), raising=False)
    tokenizer = _tokenizer(TEMPLATE)
    tokenizer.add_special_tokens({"eos_token": "</s>"})
    eos = tokenizer.eos_token_id
    # What a tokenizer.json post-processor appending EOS does: EOS after every encoding
    # (add_eos_token in tokenizer_config.json does not change it for a fast tokenizer).
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", eos)]
    )
    # Row 0 writes the EOS itself (not warned about); rows 1 and 2 get it appended.
    rows = [{"prompt": "add one </s>"}, {"prompt": "add two"}, {"prompt": "add one two"}]
    config = DataConfig(shuffle=False, apply_chat_template=setting)
    with caplog.at_level(logging.WARNING):
        loader = PromptLoader(datasets.Dataset.from_list(rows), tokenizer, config, seed=0)
    assert (loader.token_ids[1][-1] == eos) is warned
    warnings = [r.getMessage() for r in caplog.records if "EOS" in r.getMessage()]
    assert warnings == warned * [
        "row 1 of column 'prompt' ends with the EOS token '</s>' that the tokenizer appends "
        "to every encoding: the model is asked to continue after end-of-sequence; remove "
        "'</s>' from the \"single\" template of the post_processor (TemplateProcessing) in "
        "the tokenizer's tokenizer.json"
    ]


PREFILL = [
    {"role": "user", "content": "What is 3 + 4?"},
    {"role": "assistant", "content": "The answer is"},
]


def test_a_prompt_ending_in_an_assistant_message_is_continued_as_trl_does() -> None:
    from hfsdk_datasets.prompt_dataset import prepare_row
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tokenizer = qwen25_tokenizer()
    prompt = prepare_row({"prompt": PREFILL}, 0, "prompt", tokenizer, True, ())
    text = tokenizer.decode(prompt.token_ids)
    # The prefilled turn stays open (TRL: continue_final_message), no new turn after it.
    assert text.endswith("<|im_start|>assistant\nThe answer is")
    assert text == tokenizer.apply_chat_template(
        PREFILL, tokenize=False, add_generation_prompt=False, continue_final_message=True
    )


def test_a_template_that_cannot_continue_the_prefill_is_a_one_line_error() -> None:
    # A template that drops assistant turns cannot continue the last one.
    dropping = (
        "{% for m in messages %}{% if m['role'] != 'assistant' %}<|{{ m['role'] }}|> "
        "{{ m['content'] }} {% endif %}{% endfor %}"
    )
    with pytest.raises(HfsdkError, match=r"^a prompt ends with an assistant message") as info:
        render_prompt(PREFILL, _tokenizer(dropping), True)
    assert "\n" not in str(info.value)
