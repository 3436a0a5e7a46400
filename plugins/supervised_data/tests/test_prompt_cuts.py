"""Prompt cuts: cut rows are re-rendered, re-tokenized and the batch left-padded again."""

from __future__ import annotations

import json
from typing import Any

import torch

from hfsdk import PROMPT_MESSAGES, RENDERED_PROMPT, Batch
from hfsdk_supervised_data import reprompt

QUESTION = [{"role": "user", "content": "add one two"}]
CONVERSATION = [*QUESTION, {"role": "assistant", "content": "three"}]


def _left_padded(tokenizer: Any, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Loader-like ``input_ids`` and ``attention_mask`` of ``texts`` (template already in)."""
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(map(len, ids))
    input_ids = torch.full((len(ids), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, tokens in enumerate(ids):
        input_ids[row, width - len(tokens) :] = torch.tensor(tokens)
        mask[row, width - len(tokens) :] = 1
    return input_ids, mask


def _batch(tokenizer: Any) -> Batch:
    """Row 0: a whole conversation as its prompt; row 1: a short question (both templated)."""
    rendered = [
        tokenizer.apply_chat_template(CONVERSATION, tokenize=False, continue_final_message=True),
        tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True),
    ]
    input_ids, mask = _left_padded(tokenizer, rendered)
    return Batch.from_dict(
        tensors={
            "input_ids": input_ids,
            "attention_mask": mask,
            "position_ids": (mask.cumsum(dim=1) - 1).clamp(min=0),
        },
        non_tensors={
            PROMPT_MESSAGES: [CONVERSATION, QUESTION],
            "raw_prompt": ["whole conversation", "add one two"],
            RENDERED_PROMPT: rendered,
            "uid": ["a", "b"],
        },
    )


def test_a_cut_row_gets_the_loaders_tokens_and_the_batch_is_padded_again(make_tokenizer) -> None:
    tok = make_tokenizer()
    prompts = _batch(tok)
    before = prompts["input_ids"].clone()
    out = reprompt(
        prompts, {0: QUESTION}, tok, use_template=True, tools=lambda: [], where=lambda i: f"{i}"
    )
    # Both rows now hold the question alone: the same tokens, so no padding is left.
    assert out["input_ids"].tolist() == [out["input_ids"][1].tolist()] * 2
    assert out["attention_mask"].tolist() == [[1] * out["input_ids"].shape[1]] * 2
    assert out["position_ids"][0].tolist() == list(range(out["input_ids"].shape[1]))
    assert list(out[PROMPT_MESSAGES]) == [QUESTION, QUESTION]
    assert out[RENDERED_PROMPT][0] == prompts[RENDERED_PROMPT][1]
    assert out["raw_prompt"][0] == "add one two"  # plain_rendering of the question
    assert list(out["uid"]) == ["a", "b"]  # other columns are kept
    assert torch.equal(prompts["input_ids"], before)  # the caller's batch is left as it was


def test_a_text_cut_has_no_messages_and_no_cut_asks_for_no_tools(make_tokenizer) -> None:
    tok = make_tokenizer()
    prompts = _batch(tok)
    asked: list[bool] = []

    def tools() -> list[Any]:
        asked.append(True)
        return []

    assert reprompt(prompts, {}, tok, use_template=False, tools=tools, where=str) is prompts
    assert not asked
    out = reprompt(prompts, {0: "add one"}, tok, use_template=False, tools=tools, where=str)
    assert asked == [True]
    assert out[PROMPT_MESSAGES][0] is None
    assert out["raw_prompt"][0] == "add one"
    width = out["input_ids"].shape[1]
    # Row 0 is now two words, left-padded to row 1's width.
    assert tok.convert_ids_to_tokens(out["input_ids"][0][width - 2 :].tolist()) == ["add", "one"]
    assert out["attention_mask"][0].tolist() == [0] * (width - 2) + [1, 1]
    assert out["position_ids"][0].tolist() == [0] * (width - 1) + [1]


def test_a_cut_row_gets_its_own_tools_and_only_rows_without_ask_for_the_runs(
    make_tokenizer,
) -> None:  # type: ignore[no-untyped-def]
    # One "call" per tool schema the template is given, so the prompt shows which it got.
    tok = make_tokenizer(
        "{% for t in tools or [] %}call {% endfor %}"
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    prompts = _batch(tok)
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    asked: list[bool] = []

    def tools() -> list[Any]:
        asked.append(True)
        return [tool, tool]

    # Row 0's own tools column (a JSON string, as parquet files hold it); row 1 has none.
    prompts["schemas"] = [json.dumps([tool]), None]

    def calls(out) -> list[int]:  # type: ignore[no-untyped-def]
        return [tok.convert_ids_to_tokens(r.tolist()).count("call") for r in out["input_ids"]]

    out = reprompt(prompts, {0: QUESTION}, tok, use_template=True, tools=tools, where=str,
                   tools_key="schemas")  # fmt: skip
    assert calls(out)[0] == 1 and not asked  # row 0's own tools; the run's never asked for
    out = reprompt(prompts, {0: QUESTION, 1: QUESTION}, tok, use_template=True, tools=tools,
                   where=str, tools_key="schemas")  # fmt: skip
    assert calls(out) == [1, 2] and asked == [True]  # row 1 has none: the run's, asked once
