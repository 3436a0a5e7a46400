"""The gateway review's faults: tool schemas across turns, ``serving: turn`` sampling and
log-probs, a refusal's ``budget`` finish, an empty streamed answer's log-probs, ``n > 1``
branches and completions' top-k log-probs."""

from __future__ import annotations

import json
import sys
from typing import Any

import openai
import pytest
import torch

from hfsdk import Batch, generate_rollout
from hfsdk_agents.tool_use.build import ToolUseSpec, train_tokenizer
from hfsdk_agents.tool_use.task import call_text
from hfsdk_datasets import prepare_row

from ..fakes import ScriptedRollout, prompt_batch, rollout_for
from ..template_conversation import FAMILIES, PROMPT, SCHEMAS, model_turns
from .helpers import request_rollout

TOKENIZER = train_tokenizer(ToolUseSpec())
EOS = TOKENIZER.eos_token_id
MODULE = sys.modules[__name__]


def ids(text: str) -> list[int]:
    return TOKENIZER.encode(text, add_special_tokens=False)


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)


def serve(agent: Any, seeded: Any, **multi_turn: Any) -> tuple[Any, Batch]:
    """Run ``agent`` on one plain prompt with a request-serving scripted rollout."""
    MODULE.AGENT = agent  # type: ignore[attr-defined]
    settings = {"agent": f"{__name__}:AGENT", "renderer": "plain", "max_response_tokens": 32}
    rollout = request_rollout(TOKENIZER, seeded, **{**settings, **multi_turn})
    return rollout, generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))


# -- 1. tool schemas across turns ------------------------------------------------------------

SENT: list[list[dict[str, Any]]] = []


def _tool_agent(send_tools: bool) -> Any:
    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: list[dict[str, Any]] = [dict(m) for m in PROMPT]
        extra = {"tools": SCHEMAS} if send_tools else {}
        for _ in range(4):
            SENT.append(json.loads(json.dumps(messages)))
            reply = c.chat.completions.create(
                model="policy",
                messages=messages,  # type: ignore[arg-type]
                max_tokens=400,
                **extra,  # type: ignore[arg-type]
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return
            for call in message.tool_calls:
                args = json.loads(call.function.arguments)  # type: ignore[union-attr]
                content = str(args["a"] + args["b"])
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})

    return agent


def _run_tools(*, send_tools: bool, run_tools: bool) -> tuple[Any, Batch, Any]:
    """qwen2.5 template; the row's prompt rendered with the run's tools (``run_tools``)."""
    family = FAMILIES["qwen2.5"]
    tok = family["tokenizer"]()
    end = tok.eos_token_id
    turns = model_turns(family)
    marker = tok.encode("</tool_response>", add_special_tokens=False)

    def seeded(context: list[int], seed: int) -> list[int]:
        done = sum(
            context[i : i + len(marker)] == marker for i in range(len(context) - len(marker) + 1)
        )
        return [*tok.encode(turns[min(done, 2)], add_special_tokens=False), end]

    SENT.clear()
    MODULE.AGENT = _tool_agent(send_tools)  # type: ignore[attr-defined]
    rollout = request_rollout(
        tok,
        seeded,
        agent=f"{__name__}:AGENT",
        renderer="chat_template",
        parser="hermes",
        stop_token_ids=(end,),
        max_response_tokens=400,
        tools=["add"] if run_tools else [],
    )
    schemas = SCHEMAS if run_tools else None
    prepared = prepare_row({"prompt": PROMPT}, 0, "prompt", tok, True, schemas)
    prompt = torch.tensor([prepared.token_ids])
    batch = Batch.from_dict(
        tensors={"input_ids": prompt, "attention_mask": torch.ones_like(prompt)},
        non_tensors={k: [v] for k, v in prepared.row.items()},
        meta={"n": 1},
    )
    return rollout, generate_rollout(rollout, batch), tok


def _check_full_renders_with_tools(rollout: Any, out: Batch, tok: Any) -> None:
    assert len(rollout.requests) == len(SENT) == 3  # call, call, answer
    for request, messages in zip(rollout.requests, SENT, strict=True):
        full = tok.apply_chat_template(
            messages, tools=SCHEMAS, tokenize=True, add_generation_prompt=True
        )
        full = list(full["input_ids"] if hasattr(full, "keys") else full)
        assert list(request.prompt_ids) == full
    assert list(out["segment_index"]) == [0]  # one segment: no turn re-rendered


def test_a_first_request_with_tools_is_rendered_with_them_though_the_row_has_none() -> None:
    rollout, out, tok = _run_tools(send_tools=True, run_tools=False)
    _check_full_renders_with_tools(rollout, out, tok)


def test_a_request_without_tools_is_rendered_with_the_runs_prompt_tools() -> None:
    rollout, out, tok = _run_tools(send_tools=False, run_tools=True)
    _check_full_renders_with_tools(rollout, out, tok)


# -- 2. serving: turn -------------------------------------------------------------------------


class NoLogprobsRollout(ScriptedRollout):
    """``generate_sequences`` without ``rollout_log_probs`` (as the hf decoder returns it)."""

    def generate_sequences(self, prompts: Batch) -> Batch:
        out = super().generate_sequences(prompts)
        return Batch.from_dict(
            tensors={"responses": out["responses"], "response_mask": out["response_mask"]},
            meta={"rollout_metrics": {}},
        )


def _serve_turn(agent: Any, rollout_class: type[ScriptedRollout] = ScriptedRollout) -> Batch:
    MODULE.AGENT = agent  # type: ignore[attr-defined]
    base = rollout_for(
        TOKENIZER,
        lambda c: [*ids("7"), EOS],
        agent=f"{__name__}:AGENT",
        renderer="plain",
        max_response_tokens=32,
        serving="turn",
    )
    rollout = rollout_class(base.config, base.actor, lambda c: [*ids("7"), EOS])
    return generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))


def test_serving_turn_refuses_logprobs_the_rollout_does_not_report_and_trains_no_turn() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        try:
            c.chat.completions.create(model="policy", messages=messages, logprobs=True)
        except openai.APIStatusError as err:
            got["error"] = (err.status_code, err.body)
        got["retry"] = c.chat.completions.create(model="policy", messages=messages)

    out = _serve_turn(agent, NoLogprobsRollout)
    status, body = got["error"]
    assert status == 400 and body["param"] == "logprobs"  # type: ignore[index]
    assert got["retry"].choices[0].message.content == "7"
    # the refused turn is not trained: only the answered retry is
    assert out["agent_turns"][0] == 1
    assert out["agent_trajectory"][0]["finish"] == "stop"


@pytest.mark.parametrize(
    ("setting", "value"), [("temperature", 0.0), ("top_p", 0.5), ("temperature", 1.0)]
)
def test_serving_turn_refuses_a_temperature_or_top_p_other_than_the_runs(
    setting: str, value: float
) -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        try:
            got["reply"] = c.chat.completions.create(
                model="policy",
                messages=messages,
                **{setting: value},  # type: ignore[arg-type]
            )
        except openai.APIStatusError as err:
            got["error"] = (err.status_code, err.body)
            c.chat.completions.create(model="policy", messages=messages)

    _serve_turn(agent)
    if value == 1.0:  # the run's own temperature: served
        assert got["reply"].choices[0].message.content == "7"
        return
    status, body = got["error"]
    assert status == 400 and body["param"] == setting  # type: ignore[index]
    assert f"{setting}={value!r} is not served" in body["message"]  # type: ignore[index]


def test_serving_turn_waits_for_every_trajectory_when_one_asks_for_n_choices() -> None:
    """The n copies of one request are one waiting trajectory: they used to close the turn
    before the other trajectory (slower to its first request) was waiting."""
    import time

    def agent(base_url: str, row: dict[str, Any]) -> None:
        slow = row["raw_prompt"].startswith("2")
        if slow:
            time.sleep(0.2)  # thinks a while before its first request
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        client(base_url).chat.completions.create(
            model="policy", messages=messages, n=1 if slow else 2
        )

    MODULE.AGENT = agent  # type: ignore[attr-defined]
    rollout = rollout_for(
        TOKENIZER,
        lambda c: [*ids("7"), EOS],
        agent=f"{__name__}:AGENT",
        renderer="plain",
        max_response_tokens=16,
    )
    out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["1 + 1 =", "2 + 2 ="]))
    assert rollout.calls == 1  # one turn: both trajectories' requests, three rows
    assert [t["finish"] for t in out["agent_trajectory"]] == ["stop", "stop"]


# -- 3. a refusal's budget finish ---------------------------------------------------------------


def test_a_refused_request_does_not_mark_the_trajectory_budget_when_a_later_one_succeeds() -> None:
    def seeded(context: list[int], seed: int) -> list[int]:
        return [*ids("1 2 3 4 5 6 7 8 9 10 11 12"), EOS] if seed == 0 else [*ids("7"), EOS]

    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        reply = c.chat.completions.create(model="policy", messages=messages)
        long = [
            *messages,
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": " ".join(str(i) for i in range(1, 21))},
        ]
        with pytest.raises(openai.BadRequestError) as refused:
            c.chat.completions.create(model="policy", messages=long)
        got["code"] = refused.value.code
        short = [*messages[:1], {"role": "user", "content": "7"}]
        c.chat.completions.create(model="policy", messages=short)

    _, out = serve(agent, seeded, max_response_tokens=24)
    assert got["code"] == "context_length_exceeded"
    assert [t["finish"] for t in out["agent_trajectory"]] == ["segment", "stop"]


# -- 4. streaming an answer without text -------------------------------------------------------


def test_a_streamed_answer_without_text_keeps_its_content_and_logprobs() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        with c.chat.completions.stream(model="policy", messages=messages, logprobs=True) as s:
            for _ in s:
                pass
            got["final"] = s.get_final_completion()

    rollout, _ = serve(agent, lambda c, s: [EOS])
    final = got["final"].choices[0]
    assert final.message.content == ""
    assert final.logprobs is not None
    lps = [t.logprob for t in final.logprobs.content]
    assert lps == pytest.approx(list(rollout.results[0].logprobs))


# -- 5. n > 1 ----------------------------------------------------------------------------------


def _by_draw(context: list[int], seed: int) -> list[int]:
    """Each draw answers its own number; after a follow-up turn, "7"."""
    if ids("again")[0] in context:
        return [*ids("7"), EOS]
    return [*ids(str(10 + seed)), EOS]


def test_n_choices_the_next_request_continues_the_branch_it_extends() -> None:
    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        reply = c.chat.completions.create(model="policy", messages=messages, n=3)
        picked = reply.choices[2].message.model_dump(exclude_none=True)
        follow = [*messages, picked, {"role": "user", "content": "again"}]
        c.chat.completions.create(model="policy", messages=follow)

    rollout, out = serve(agent, _by_draw)
    trained = [s["token_ids"] for s in out["agent_trajectory"][0]["segments"] if s["trained"]]
    assert trained == [list(rollout.results[2].token_ids), [*ids("7"), EOS]]


def test_n_choices_the_first_trains_when_the_trajectory_ends_after_them() -> None:
    def agent(base_url: str, row: dict[str, Any]) -> float:
        c = client(base_url)
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        c.chat.completions.create(model="policy", messages=messages, n=3)
        return 1.0

    rollout, out = serve(agent, _by_draw)
    trained = [s["token_ids"] for s in out["agent_trajectory"][0]["segments"] if s["trained"]]
    assert trained == [list(rollout.results[0].token_ids)]  # documented in docs/agents.md


# -- 6. completions' top-k log-probs -------------------------------------------------------------


def test_completions_refuse_top_k_logprobs() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        with pytest.raises(openai.BadRequestError) as refused:
            c.completions.create(model="policy", prompt=row["raw_prompt"], logprobs=5)
        got["error"] = refused.value
        got["sampled"] = c.completions.create(model="policy", prompt=row["raw_prompt"], logprobs=0)

    rollout, _ = serve(agent, lambda c, s: [*ids("7"), EOS])
    assert got["error"].param == "logprobs"
    lp = got["sampled"].choices[0].logprobs
    assert lp.token_logprobs == pytest.approx(list(rollout.results[0].logprobs))


# -- 7. completions text: whitespace the model's tokens already hold ---------------------------


def _qwen_text_run(agent: Any, said: str) -> tuple[Any, Any]:
    """A qwen2.5-tokenizer completions run whose model says ``said`` (no end token)."""
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    MODULE.AGENT = agent  # type: ignore[attr-defined]
    rollout = request_rollout(
        tok,
        lambda c, s: tok.encode(said, add_special_tokens=False),
        agent=f"{__name__}:AGENT",
        renderer="plain",
        max_response_tokens=64,
    )
    generate_rollout(rollout, prompt_batch(tok, ["Capital of France? "]))
    return rollout, tok


@pytest.mark.parametrize(
    ("said", "settings", "joined"),
    [
        # the stop string "\n" is in the kept tokens but not in the text returned
        ("Paris.\nQ: and Berlin?", {"stop": ["\n"]}, "\nQ: and Rome?"),
        # the model's own trailing newline is returned and echoed
        ("Paris.\n", {"max_tokens": 6}, "Q: and Rome?"),
    ],
)
def test_a_completions_echo_reads_as_the_agents_prompt(
    said: str, settings: dict[str, Any], joined: str
) -> None:
    sent: list[str] = []

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        first = c.completions.create(model="policy", prompt=row["raw_prompt"], **settings)
        sent.append(row["raw_prompt"] + first.choices[0].text + joined)
        c.completions.create(model="policy", prompt=sent[-1], max_tokens=2)

    rollout, tok = _qwen_text_run(agent, said)
    assert len(rollout.requests) == 2
    assert tok.decode(list(rollout.requests[1].prompt_ids)) == sent[0]


# -- 8. the call end marker is part of the text ------------------------------------------------


def test_the_call_end_marker_stays_in_returned_text() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        got["text"] = c.completions.create(model="policy", prompt=row["raw_prompt"])
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        got["none"] = c.chat.completions.create(
            model="policy", messages=messages, tool_choice="none"
        )

    call = call_text(3, 4)
    serve(agent, lambda c, s: [*ids(call), *ids("5 6")], max_turns=4)
    assert got["text"].choices[0].text == call
    assert got["none"].choices[0].message.content == call


def test_an_echoed_malformed_call_stays_one_segment() -> None:
    tok = FAMILIES["qwen2.5"]["tokenizer"]()
    end = tok.eos_token_id
    bad = '<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": }}\n</tool_call>'
    got: dict[str, Any] = {}

    def seeded(context: list[int], seed: int) -> list[int]:
        said = "The answer is 12." if context.count(end) >= 3 else bad
        return [*tok.encode(said, add_special_tokens=False), end]

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: Any = [dict(m) for m in PROMPT]
        reply = c.chat.completions.create(model="policy", messages=messages, tools=SCHEMAS)
        got["content"] = reply.choices[0].message.content
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "user", "content": "That call was malformed; try again."})
        c.chat.completions.create(model="policy", messages=messages, tools=SCHEMAS)

    MODULE.AGENT = agent  # type: ignore[attr-defined]
    rollout = request_rollout(
        tok,
        seeded,
        agent=f"{__name__}:AGENT",
        renderer="chat_template",
        parser="hermes",
        max_response_tokens=400,
    )
    out = generate_rollout(rollout, _template_batch(tok, SCHEMAS))
    assert got["content"] == bad
    assert list(out["segment_index"]) == [0]


def _template_batch(tok: Any, schemas: Any) -> Batch:
    prepared = prepare_row({"prompt": PROMPT}, 0, "prompt", tok, True, schemas)
    prompt = torch.tensor([prepared.token_ids])
    return Batch.from_dict(
        tensors={"input_ids": prompt, "attention_mask": torch.ones_like(prompt)},
        non_tensors={k: [v] for k, v in prepared.row.items()},
        meta={"n": 1},
    )


# -- 9. the developer role ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["qwen2.5", "qwen3", "llama3"])
def test_a_developer_message_reaches_the_model_as_a_system_message(name: str) -> None:
    tok = FAMILIES[name]["tokenizer"]()

    def agent(base_url: str, row: dict[str, Any]) -> None:
        messages: Any = [
            {"role": "developer", "content": "Always answer in French."},
            {"role": "user", "content": "What is 3 + 4 + 5?"},
        ]
        client(base_url).chat.completions.create(model="policy", messages=messages)

    MODULE.AGENT = agent  # type: ignore[attr-defined]
    rollout = request_rollout(
        tok,
        lambda c, s: [*tok.encode("ok", add_special_tokens=False), tok.eos_token_id],
        agent=f"{__name__}:AGENT",
        renderer="chat_template",
        max_response_tokens=400,
    )
    generate_rollout(rollout, _template_batch(tok, SCHEMAS))
    as_system = [
        {"role": "system", "content": "Always answer in French."},
        {"role": "user", "content": "What is 3 + 4 + 5?"},
    ]
    full = tok.apply_chat_template(as_system, tokenize=True, add_generation_prompt=True)
    full = list(full["input_ids"] if hasattr(full, "keys") else full)
    assert list(rollout.requests[0].prompt_ids) == full


# -- 10. log-prob bytes and text offsets of byte-level tokens ----------------------------------


def test_logprob_bytes_and_text_offsets_hold_multi_byte_characters() -> None:
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    said = "Café ☕ 日本"
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: Any = [{"role": "user", "content": "hi"}]
        got["chat"] = c.chat.completions.create(model="policy", messages=messages, logprobs=True)
        got["text"] = c.completions.create(model="policy", prompt="hi", logprobs=1)

    MODULE.AGENT = agent  # type: ignore[attr-defined]
    rollout = request_rollout(
        tok,
        lambda c, s: [*tok.encode(said, add_special_tokens=False), tok.eos_token_id],
        agent=f"{__name__}:AGENT",
        renderer="plain",
        max_response_tokens=64,
        max_turns=4,
    )
    generate_rollout(rollout, prompt_batch(tok, ["hi"]))
    content = got["chat"].choices[0].logprobs.content
    assert bytes(b for t in content for b in t.bytes).decode("utf-8") == said + tok.eos_token
    choice = got["text"].choices[0]
    assert choice.text == said
    # each offset counts the characters the tokens before it complete
    held = [bytes(t.bytes) for t in content]
    starts = [len(b"".join(held[:i]).decode("utf-8", "ignore")) for i in range(len(held))]
    assert choice.logprobs.text_offset == starts
