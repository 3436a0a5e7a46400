"""SFT's rows -> supervised batch: layouts, the assistant-only mask token by token, errors."""

from __future__ import annotations

import pytest

from hfsdk import Batch, HfsdkError
from hfsdk_sft.sft_config import SFTConfig
from hfsdk_sft.targets import supervised_batch

TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
WORDS = ["<pad>", "<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
WORDS += ["add", "one", "two", "three", "four", "again", "ok", "=", "+", "1", "2", "3"]


def _tokenizer(template: str | None):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>", eos_token="</s>"
    )
    tok.chat_template = template
    return tok


def _rows(rows: list[dict]) -> Batch:
    keys = sorted({k for r in rows for k in r})
    return Batch.from_dict(non_tensors={k: [r.get(k) for r in rows] for k in keys})


def test_messages_layout_trains_assistant_tokens_only() -> None:
    tok = _tokenizer(TEMPLATE)
    conversation = [
        {"role": "user", "content": "add one two"},
        {"role": "assistant", "content": "three"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "ok"},
    ]
    out = supervised_batch(
        _rows([{"messages": conversation}]), tok, config=SFTConfig(), prompt_key="prompt",
        use_template=True,
    )  # fmt: skip
    batch = out.batch
    assert batch is not None and out.dropped == 0
    words = tok.convert_ids_to_tokens(batch["responses"][0].tolist())
    mask = batch["response_mask"][0].tolist()
    assert list(zip(words, mask, strict=True)) == [
        ("three", 1), ("<|end|>", 1),
        ("<|user|>", 0), ("again", 0), ("<|end|>", 0), ("<|assistant|>", 0),
        ("ok", 1), ("<|end|>", 1), ("</s>", 1),
    ]  # fmt: skip
    assert tok.convert_ids_to_tokens(batch["prompts"][0].tolist()) == [
        "<|user|>", "add", "one", "two", "<|end|>", "<|assistant|>"
    ]  # fmt: skip
    # nll reads the mask; the advantages are the mask and no old log-probs are needed.
    assert batch["advantages"].tolist() == batch["response_mask"].float().tolist()
    assert float(batch["old_log_probs"].abs().sum()) == 0.0


def test_prompt_completion_layout_and_numeric_answers_and_length_limit() -> None:
    tok = _tokenizer(None)
    rows = _rows([
        {"prompt": "1 + 2 =", "answer": 3},
        {"prompt": "1 + 1 + 1 + 1 =", "answer": "two"},
    ])  # fmt: skip
    config = SFTConfig(response_key="answer", max_length=7)
    out = supervised_batch(rows, tok, config=config, prompt_key="prompt", use_template=False)
    assert out.dropped == 1 and out.batch is not None and len(out.batch) == 1
    assert tok.convert_ids_to_tokens(out.batch["responses"][0].tolist()) == ["3", "</s>"]
    assert out.batch["response_mask"].tolist() == [[1, 1]]


def test_a_row_without_a_response_is_a_one_line_error() -> None:
    with pytest.raises(HfsdkError, match="neither a 'messages' conversation nor a 'completion'"):
        supervised_batch(
            _rows([{"prompt": "add"}]), _tokenizer(None), config=SFTConfig(),
            prompt_key="prompt", use_template=False,
        )  # fmt: skip


def test_a_column_of_numbers_is_a_numeric_response_and_a_bool_is_refused() -> None:
    # A column of only ints holds numpy scalars (np.int64 is no int), unlike a mixed column.
    tok = _tokenizer(None)
    config = SFTConfig(response_key="answer")
    rows = _rows([{"prompt": "1 + 2 =", "answer": 3}, {"prompt": "1 + 1 =", "answer": 2}])
    out = supervised_batch(rows, tok, config=config, prompt_key="prompt", use_template=False)
    assert out.batch is not None and out.dropped == 0
    responses = [tok.convert_ids_to_tokens(r.tolist()) for r in out.batch["responses"]]
    assert responses == [["3", "</s>"], ["2", "</s>"]]
    with pytest.raises(HfsdkError, match="row 0, column 'answer' is True; expected a string"):
        supervised_batch(
            _rows([{"prompt": "1 + 2 =", "answer": True}]), tok, config=config,
            prompt_key="prompt", use_template=False,
        )  # fmt: skip


def test_validation_cuts_render_each_rows_own_tools_else_the_runs() -> None:
    import torch

    from hfsdk import PROMPT_MESSAGES
    from hfsdk_sft.targets import context_prompts

    # One "ok" per tool schema the template is given, so the prompt shows which it got.
    tok = _tokenizer("{% for t in tools or [] %}ok {% endfor %}" + TEMPLATE)
    conversation = [
        {"role": "user", "content": "add one two"},
        {"role": "assistant", "content": "three"},
    ]
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    ids = tok("add one two")["input_ids"]
    prompts = Batch.from_dict(
        tensors={"input_ids": torch.tensor([ids, ids]), "attention_mask": torch.ones(2, 3)},
        non_tensors={
            PROMPT_MESSAGES: [conversation, conversation],
            "messages": [conversation, conversation],
            "tools": [[tool], None],
            "uid": [0, 1],
        },
    )
    out = context_prompts(
        prompts, tok, config=SFTConfig(), prompt_key="messages", use_template=True,
        tools=lambda: [tool, tool],
    )  # fmt: skip
    words = [tok.convert_ids_to_tokens(r[m.bool()].tolist()) for r, m in
             zip(out["input_ids"], out["attention_mask"], strict=True)]  # fmt: skip
    # Before: both rows got the run's two tools, as training never renders row 0.
    assert words[0].count("ok") == 1  # row 0's own tools column, as training renders it
    assert words[1].count("ok") == 2  # no tools of its own: the run's, as the loader's
    assert _training_prompt(tok, conversation, [tool]) == words[0]


def _training_prompt(tok, conversation, tools) -> list[str]:  # type: ignore[no-untyped-def]
    """The prompt tokens training renders for ``conversation`` with ``tools`` (test helper)."""
    from hfsdk_sft.targets import row_sequence

    seq = row_sequence(
        {"messages": conversation, "tools": tools}, tok, config=SFTConfig(),
        prompt_key="messages", use_template=True, where="row 0",
    )  # fmt: skip
    return tok.convert_ids_to_tokens(list(seq.prompt_ids))
