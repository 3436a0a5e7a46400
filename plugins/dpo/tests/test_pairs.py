"""DPO's rows -> pair batch: implicit prompts (data.prompt_key = the chosen column), length limit."""

from __future__ import annotations

from hfsdk import ROW_GROUP, Batch
from hfsdk_dpo.dpo_config import DPOConfig
from hfsdk_dpo.pairs import pair_batch, pair_columns

WORDS = ["<pad>", "<unk>", "</s>", "add", "one", "two", "three", "four", "user:", "assistant:"]


def _tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>", eos_token="</s>"
    )


def test_implicit_prompt_rows_read_through_the_chosen_column() -> None:
    user = {"role": "user", "content": "add one two"}
    rows = Batch.from_dict(
        non_tensors={
            "chosen": [[user, {"role": "assistant", "content": "three"}]],
            "rejected": [[user, {"role": "assistant", "content": "four four"}]],
        }
    )
    tok = _tokenizer()
    out = pair_batch(rows, tok, config=DPOConfig(), prompt_key="chosen", use_template=False)
    assert out.batch is not None and out.batch.meta[ROW_GROUP] == 2
    words = [tok.convert_ids_to_tokens(r.tolist()) for r in out.batch["responses"]]
    assert words == [["three", "</s>", "<pad>"], ["four", "four", "</s>"]]
    # The shared user message is the prompt of both rows.
    assert tok.convert_ids_to_tokens(out.batch["prompts"][0].tolist()) == ["add", "one", "two"]
    limited = pair_batch(
        rows, tok, config=DPOConfig(max_length=5), prompt_key="chosen", use_template=False
    )
    assert limited.batch is None and limited.dropped == 1


def test_a_prompt_key_naming_the_rejected_column_is_implicit_prompt_data_too() -> None:
    """Before, only the chosen column meant implicit prompts: ``data.prompt_key=rejected``
    made the rejected response the prompt (the reward model already treats both alike)."""
    assert pair_columns(DPOConfig(), "rejected").prompt == ""
    assert pair_columns(DPOConfig(), "chosen").prompt == ""
    assert pair_columns(DPOConfig(), "prompt").prompt == "prompt"
    user = {"role": "user", "content": "add one two"}
    rows = Batch.from_dict(
        non_tensors={
            "chosen": [[user, {"role": "assistant", "content": "three"}]],
            "rejected": [[user, {"role": "assistant", "content": "four four"}]],
        }
    )
    tok = _tokenizer()
    out = pair_batch(rows, tok, config=DPOConfig(), prompt_key="rejected", use_template=False)
    assert out.batch is not None
    assert tok.convert_ids_to_tokens(out.batch["prompts"][0].tolist()) == ["add", "one", "two"]


def test_the_rows_tool_schemas_are_read_from_algorithm_tools_key() -> None:
    from hfsdk.core.config import load_run_config

    # Before: pairs never read a tools column (SFT gave its rows' tools to the template).
    assert pair_columns(DPOConfig(), "prompt").tools == "tools"
    config = load_run_config("dpo", None, ["algorithm.tools_key=schemas"])
    assert pair_columns(config.algorithm, "prompt").tools == "schemas"


def test_validation_cuts_render_each_rows_own_tools_else_the_runs() -> None:
    import torch

    from hfsdk import PROMPT_MESSAGES
    from hfsdk_dpo.pairs import context_prompts

    # One "one" per tool schema the template is given, so the prompt shows which it got.
    tok = _tokenizer()
    tok.chat_template = (
        "{% for t in tools or [] %}one {% endfor %}"
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"
    )
    user = {"role": "user", "content": "add"}
    chosen = [user, {"role": "assistant", "content": "three"}]
    rejected = [user, {"role": "assistant", "content": "four"}]
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    ids = tok("add three")["input_ids"]
    prompts = Batch.from_dict(
        tensors={"input_ids": torch.tensor([ids, ids]), "attention_mask": torch.ones(2, 2)},
        non_tensors={
            PROMPT_MESSAGES: [chosen, chosen],
            "chosen": [chosen, chosen],
            "rejected": [rejected, rejected],
            "tools": [[tool], None],
            "uid": [0, 1],
        },
    )
    out = context_prompts(
        prompts, tok, config=DPOConfig(), prompt_key="chosen", use_template=True,
        tools=lambda: [tool, tool],
    )  # fmt: skip
    words = [tok.convert_ids_to_tokens(r[m.bool()].tolist()) for r, m in
             zip(out["input_ids"], out["attention_mask"], strict=True)]  # fmt: skip
    # Before: both rows got the run's two tools, though training renders row 0 with its one.
    assert words[0].count("one") == 1
    assert words[1].count("one") == 2  # no tools of its own: the run's, as the loader's
