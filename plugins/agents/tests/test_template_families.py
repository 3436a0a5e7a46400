"""Golden continuity of the tool loop's token stream across chat-template families.

At every turn boundary the ids the loop sends (engine tokens + rendered tool turns)
must be what the template renders for the conversation so far, as a fresh request
would see it: one segment for the Qwen2.5- and Llama-3-style templates. The
Qwen3-style template drops earlier turns' ``<think>`` blocks, so each turn that
thought starts a new segment from the re-rendered conversation.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hfsdk import Batch, generate_rollout
from hfsdk_datasets import prepare_row

from .fakes import rollout_for
from .template_conversation import ANSWER, FAMILIES, PROMPT, SCHEMAS, THINK, model_turns


def _run(name: str) -> tuple[Any, Batch, Any, list[str]]:
    family = FAMILIES[name]
    tok = family["tokenizer"]()
    end = tok.eos_token_id  # <|im_end|> / <|eot_id|>
    turns = model_turns(family)
    # The tool turn's closing marker tells how far the conversation got.
    marker = tok.encode(
        "</tool_response>" if name != "llama3" else "ipython", add_special_tokens=False
    )

    def script(context: list[int]) -> list[int]:
        done = sum(
            context[i : i + len(marker)] == marker for i in range(len(context) - len(marker) + 1)
        )
        return [*tok.encode(turns[done], add_special_tokens=False), end]

    rollout = rollout_for(
        tok,
        script,
        width=64,
        tools=["add"],
        renderer="chat_template",
        parser=family["parser"],
        max_response_tokens=400,
        max_turns=4,
    )
    prepared = prepare_row({"prompt": PROMPT}, 0, "prompt", tok, True, SCHEMAS)
    ids = torch.tensor([prepared.token_ids])
    prompts = Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        non_tensors={k: [v] for k, v in prepared.row.items()},
        meta={"n": 1},
    )
    return rollout, generate_rollout(rollout, prompts), tok, turns


def _render(tok: Any, messages: list[dict[str, Any]], next_turn: bool = True) -> list[int]:
    ids = tok.apply_chat_template(
        messages, tools=SCHEMAS, tokenize=True, add_generation_prompt=next_turn
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _conversations(turns: list[str]) -> list[list[dict[str, Any]]]:
    """The conversation as a client would send it before each model turn."""
    so_far = [dict(m) for m in PROMPT]
    out = [list(so_far)]
    for text, result in zip(turns[:2], ("7", "12"), strict=True):
        so_far += [
            {"role": "assistant", "content": text},
            {"role": "tool", "name": "add", "content": result},
        ]
        out.append(list(so_far))
    return out


@pytest.mark.parametrize("name", ["qwen2.5", "llama3", "qwen3-real"])
def test_the_token_stream_is_the_full_render_at_every_turn_boundary(name: str) -> None:
    rollout, out, tok, turns = _run(name)
    assert len(rollout.contexts) == 3  # three model turns, three requests
    for context, messages in zip(rollout.contexts, _conversations(turns), strict=True):
        assert context == _render(tok, messages)
    assert list(out["segment_index"]) == [0]  # one segment: one row
    answered = [*_conversations(turns)[-1], {"role": "assistant", "content": turns[-1]}]
    final = _render(tok, answered, next_turn=False)
    row = out["input_ids"][0][out["attention_mask"][0].bool()].tolist()
    # the trained row is the whole conversation up to the model's own end token (Qwen's
    # template closes the turn with one more newline)
    assert row == final[: len(row)] and len(final) - len(row) in (0, 1)
    assert out["agent_trajectory"][0]["finish"] == "stop"
    assert out["response_text"][0].rstrip().endswith(ANSWER)


def test_qwen3_thinking_dropped_from_history_starts_a_new_segment() -> None:
    rollout, out, tok, turns = _run("qwen3")
    conversations = _conversations(turns)
    # each request after a thinking turn is the template's rendering, not the stream
    assert [len(c) for c in rollout.contexts] == [len(_render(tok, m)) for m in conversations]
    for context, messages in zip(rollout.contexts, conversations, strict=True):
        assert context == _render(tok, messages)
    # the first turn's thinking is in what it was trained on, and gone from the second request
    think = tok.encode(THINK, add_special_tokens=False)
    assert tok.convert_tokens_to_ids("<think>") not in rollout.contexts[1]
    assert len(think) > 5
    # three segments: the turns that thought ended theirs; one training row each
    assert list(out["segment_index"]) == [0, 1, 2]
    prompt = _render(tok, conversations[0])
    width = out["responses"].shape[1]
    for k, row in enumerate(range(3)):
        prompt_part = out["input_ids"][row, :-width][out["attention_mask"][row, :-width].bool()]
        assert prompt_part.tolist() == prompt  # every row keeps the dataset's prompt
        present = out["attention_mask"][row, -width:].bool()
        response = out["responses"][row][present].tolist()
        mask = out["response_mask"][row][present].tolist()
        # context carried from the re-render (mask 0), then this segment's model turn (mask 1)
        carried = len(rollout.contexts[k]) - len(prompt)
        assert response[:carried] == rollout.contexts[k][len(prompt) :]
        assert mask[:carried] == [0] * carried
        own = tok.encode(turns[k], add_special_tokens=False)
        assert response[carried : carried + len(own)] == own
        assert mask[carried : carried + len(own)] == [1] * len(own)
    finishes = [t["finish"] for t in out["agent_trajectory"]]
    assert finishes == ["segment", "segment", "stop"]
    assert list(out["agent_turns"]) == [3, 3, 3]  # the trajectory's counts on each row
    assert out.meta["rollout_metrics"]["agent/segments_per_trajectory"] == 3.0
    assert out["response_text"][2].rstrip().endswith(ANSWER)
