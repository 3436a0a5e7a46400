"""Golden continuity of the gateway's token stream across chat-template families.

An agent written against the ``openai`` SDK runs a two-call tool conversation
through the gateway. At every request, the context the engine received must be
the tokenizer's full rendering of the messages the agent sent (with the tools and
the generation prompt): for the Qwen2.5- and Llama-3-style templates the gateway
gets there by appending the engine's own ids and the new turns (one segment, one
row); the Qwen3-style template drops earlier ``<think>`` blocks, so each turn that
thought starts a new segment whose prompt is the re-render. The rows train on the
engine's ids with the engine's log-probs, nothing else.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import torch

from hfsdk import Batch, generate_rollout
from hfsdk_datasets import prepare_row

from ..template_conversation import ANSWER, FAMILIES, PROMPT, SCHEMAS, THINK, model_turns
from .helpers import request_rollout

SENT: list[list[dict[str, Any]]] = []
"""The messages the agent sent, one list per request (filled by :func:`agent`)."""


def agent(base_url: str, row: dict[str, Any]) -> None:
    """A plain openai-SDK tool agent: call the model, run its ``add`` calls, until it answers."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages: list[dict[str, Any]] = [dict(m) for m in PROMPT]
    for _ in range(4):
        SENT.append(json.loads(json.dumps(messages)))
        reply = client.chat.completions.create(
            model="policy",
            messages=messages,
            tools=SCHEMAS,
            max_tokens=400,  # type: ignore[arg-type]
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            result = str(int(args["a"]) + int(args["b"]))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def _render(tok: Any, messages: list[dict[str, Any]]) -> list[int]:
    ids = tok.apply_chat_template(
        messages, tools=SCHEMAS, tokenize=True, add_generation_prompt=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _run(name: str, *, spelled_call: bool = False) -> tuple[Any, Batch, Any]:
    family = FAMILIES[name]
    tok = family["tokenizer"]()
    end = tok.eos_token_id  # <|im_end|> / <|eot_id|>
    turns = model_turns(family)
    # The tool turn's closing marker tells how far the conversation got.
    marker = tok.encode(
        "</tool_response>" if name != "llama3" else "ipython", add_special_tokens=False
    )

    def seeded(context: list[int], seed: int) -> list[int]:
        done = sum(
            context[i : i + len(marker)] == marker for i in range(len(context) - len(marker) + 1)
        )
        if done >= 2 or (spelled_call and done == 0):
            # one id per character: the same text, not its canonical ids
            text = ANSWER if done >= 2 else turns[0]
            return [*(tok.encode(c, add_special_tokens=False)[0] for c in text), end]
        return [*tok.encode(turns[done], add_special_tokens=False), end]

    SENT.clear()
    module = sys.modules[__name__]
    rollout = request_rollout(
        tok,
        seeded,
        agent=f"{module.__name__}:agent",
        renderer="chat_template",
        parser=family["parser"],
        stop_token_ids=(end,),
        max_response_tokens=400,
    )
    prepared = prepare_row({"prompt": PROMPT}, 0, "prompt", tok, True, SCHEMAS)
    ids = torch.tensor([prepared.token_ids])
    prompts = Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        non_tensors={k: [v] for k, v in prepared.row.items()},
        meta={"n": 1},
    )
    return rollout, generate_rollout(rollout, prompts), tok


def _trained(out: Batch, row: int) -> tuple[list[int], list[float]]:
    """The ids and rollout log-probs the row trains on (response mask 1)."""
    mask = out["response_mask"][row].bool()
    return out["responses"][row][mask].tolist(), out["rollout_log_probs"][row][mask].tolist()


def _check_every_request_is_the_full_render(rollout: Any, tok: Any) -> None:
    assert len(rollout.requests) == len(SENT) == 3  # call, call, answer
    answer = list(rollout.results[-1].token_ids[:-1])
    assert answer != tok.encode(ANSWER, add_special_tokens=False)  # not its canonical ids
    assert tok.decode(answer) == ANSWER
    for request, messages in zip(rollout.requests, SENT, strict=True):
        assert list(request.prompt_ids) == _render(tok, messages)


@pytest.mark.parametrize("name", ["qwen2.5", "llama3", "qwen3-real"])
def test_the_gateways_stream_is_the_full_render_at_every_turn_boundary(name: str) -> None:
    rollout, out, tok = _run(name)
    _check_every_request_is_the_full_render(rollout, tok)
    # the model's two calls were parsed into calls, run, and sent back: the third request
    # has both results
    assert [m["role"] for m in SENT[-1]] == ["system", "user", *["assistant", "tool"] * 2]
    assert [m["content"] for m in SENT[-1] if m["role"] == "tool"] == ["7", "12"]
    # one segment, one row: it trains on exactly the engine's ids and log-probs
    assert list(out["segment_index"]) == [0]
    ids, lps = _trained(out, 0)
    engine_ids = [t for r in rollout.results for t in r.token_ids]
    engine_lps = [lp for r in rollout.results for lp in r.logprobs]
    assert ids == engine_ids
    assert lps == pytest.approx(engine_lps, abs=1e-6)
    # the row's context is the first prompt, then each turn's tokens in order: prompt plus
    # response up to the last answer is the third request plus the answer
    present = out["attention_mask"][0].bool()
    row = out["input_ids"][0][present].tolist()
    last = rollout.requests[-1]
    assert row == [*last.prompt_ids, *rollout.results[-1].token_ids]
    assert out["agent_trajectory"][0]["finish"] == "stop"
    assert out["response_text"][0].rstrip().endswith(ANSWER)


def test_qwen3_thinking_dropped_between_turns_starts_a_segment_on_the_full_render() -> None:
    rollout, out, tok = _run("qwen3")
    _check_every_request_is_the_full_render(rollout, tok)
    # the agent sent its history back unchanged, thinking included: the template dropped it
    assert [m.get("content", "") for m in SENT[2] if m["role"] == "assistant"] == [
        THINK.rstrip()
    ] * 2
    # what the model thought is in its own tokens, and gone from the next request
    think = tok.convert_tokens_to_ids("<think>")
    assert think in rollout.results[0].token_ids
    assert think not in rollout.requests[1].prompt_ids
    assert think not in rollout.requests[2].prompt_ids
    # three segments, one row each: carried context (mask 0) then the engine's own turn
    assert list(out["segment_index"]) == [0, 1, 2]
    prompt = list(rollout.requests[0].prompt_ids)
    width = out["responses"].shape[1]
    for k, result in enumerate(rollout.results):
        prompt_part = out["input_ids"][k, :-width][out["attention_mask"][k, :-width].bool()]
        assert prompt_part.tolist() == prompt
        ids, lps = _trained(out, k)
        assert ids == list(result.token_ids)
        assert lps == pytest.approx(list(result.logprobs), abs=1e-6)
        present = out["attention_mask"][k, -width:].bool()
        response = out["responses"][k][present].tolist()
        carried = len(rollout.requests[k].prompt_ids) - len(prompt)
        # the segment's prompt is the re-render: the row's prompt, then the carried part
        assert [*prompt, *response[:carried]] == list(rollout.requests[k].prompt_ids)
        assert response[carried:] == list(result.token_ids)
    assert out["agent_trajectory"][-1]["finish"] == "stop"
    assert out["response_text"][2].rstrip().endswith(ANSWER)


def test_a_call_whose_ids_are_not_the_templates_starts_a_segment_on_the_full_render() -> None:
    """The model spelled its first call one character at a time: the agent's history is
    unchanged, but a fresh request would read the template's ids, so the gateway starts a
    segment there instead of appending to ids no request would see."""
    rollout, out, tok = _run("qwen2.5", spelled_call=True)
    _check_every_request_is_the_full_render(rollout, tok)
    assert [m["content"] for m in SENT[-1] if m["role"] == "tool"] == ["7", "12"]
    assert list(out["segment_index"]) == [0, 1]
    # the first row trains on the spelled call, the second on the second call and answer
    assert _trained(out, 0)[0] == list(rollout.results[0].token_ids)
    second = [t for r in rollout.results[1:] for t in r.token_ids]
    assert _trained(out, 1)[0] == second
    assert [t["finish"] for t in out["agent_trajectory"]] == ["segment", "stop"]


# -- the content the gateway returns --------------------------------------------------------

SAID = [{"role": "user", "content": "Say something."}]
REPLY = "Sure.\n"


def echo_agent(base_url: str, row: dict[str, Any]) -> None:
    """Sends the model's reply back as the SDK gives it, with a next user turn."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages: list[dict[str, Any]] = [dict(m) for m in SAID]
    reply = client.chat.completions.create(model="policy", messages=messages).choices[0].message  # type: ignore[arg-type]
    messages.append(reply.model_dump(exclude_none=True))
    SENT.append(json.loads(json.dumps(messages)))
    messages.append({"role": "user", "content": "Go on."})
    client.chat.completions.create(model="policy", messages=messages)  # type: ignore[arg-type]


def test_the_models_own_whitespace_is_returned_so_its_echo_stays_one_segment() -> None:
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    end = tok.eos_token_id

    def seeded(context: list[int], seed: int) -> list[int]:
        first = tok.decode(context).count("<|im_start|>user") == 1
        return [*tok.encode(REPLY if first else "Done.", add_special_tokens=False), end]

    SENT.clear()
    rollout = request_rollout(
        tok,
        seeded,
        agent=f"{__name__}:echo_agent",
        renderer="chat_template",
        stop_token_ids=(end,),
        max_response_tokens=200,
    )
    prepared = prepare_row({"prompt": SAID}, 0, "prompt", tok, True, [])
    ids = torch.tensor([prepared.token_ids])
    prompts = Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        non_tensors={k: [v] for k, v in prepared.row.items()},
        meta={"n": 1},
    )
    out = generate_rollout(rollout, prompts)
    # as an OpenAI-compatible server: the end token goes, the model's newline stays
    assert SENT[0][-1]["content"] == REPLY
    # so the echoed reply renders as the engine's tokens: one segment, one row
    assert list(out["segment_index"]) == [0]


def test_the_plain_rendering_keeps_tool_calls_and_tool_results() -> None:
    from hfsdk_agents.gateway.messages import check_messages
    from hfsdk_agents.gateway.rendering import render_conversation
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "add", "arguments": '{"a": 3, "b": 4}'}
    messages = check_messages(
        [
            {"role": "user", "content": "3 + 4 ="},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "7"},
        ]
    )
    text = tok.decode(render_conversation(tok, messages, use_template=False))
    # the call as the hermes parser reads it, the result as the plain renderer appends it
    assert text == (
        "user: 3 + 4 =\n"
        'assistant: <tool_call> {"name": "add", "arguments": {"a": 3, "b": 4}} </tool_call>\n'
        "tool: <tool_response> 7 </tool_response>\n"
        "assistant:"
    )
    llama = tok.decode(
        render_conversation(tok, messages, use_template=False, parser="llama_function")
    )
    assert '\nassistant: <function=add>{"a": 3, "b": 4}</function>\n' in llama
