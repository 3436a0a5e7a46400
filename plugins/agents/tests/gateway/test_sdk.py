"""What the openai SDK reads back: tool calls, n, log-probs, stop, usage, completions."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from hfsdk import generate_rollout
from hfsdk_agents.tool_use.build import ToolUseSpec, train_tokenizer
from hfsdk_agents.tool_use.task import call_text

from ..fakes import prompt_batch
from .helpers import request_rollout

TOKENIZER = train_tokenizer(ToolUseSpec())
EOS = TOKENIZER.eos_token_id


def ids(text: str) -> list[int]:
    return TOKENIZER.encode(text, add_special_tokens=False)


def by_seed(context: list[int], seed: int) -> list[int]:
    """Even seeds call add(3, 4); odd ones answer a number (seed-dependent) and stop."""
    if ids("</tool_response>")[0] in context:
        return [*ids("7"), EOS]
    if seed % 2 == 0:
        return [*ids(call_text(3, 4)), *ids("5 6")]
    return [*ids(f"{seed % 10} 1 2"), EOS]


def serve(agent: Any, *, seed_offset: int = 0, **multi_turn: Any) -> Any:
    """Run ``agent`` (given as this module's attribute) on one prompt; the batch."""
    import sys

    module = sys.modules[__name__]
    module.AGENT = agent  # type: ignore[attr-defined]
    rollout = request_rollout(
        TOKENIZER,
        lambda c, s: by_seed(c, s + seed_offset),
        agent=f"{__name__}:AGENT",
        renderer="plain",
        max_response_tokens=32,
        **multi_turn,
    )
    out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))
    return rollout, out


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)


def test_chat_with_tools_parses_calls_and_reports_usage_and_logprobs() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: list[Any] = [{"role": "user", "content": row["raw_prompt"]}]
        first = c.chat.completions.create(model="policy", messages=messages, logprobs=True)
        got["first"] = first
        message = first.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        call = message.tool_calls[0]
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "7"})
        got["second"] = c.chat.completions.create(model="policy", messages=messages)

    rollout, out = serve(agent, seed_offset=0)  # seed 0: a call first
    first = got["first"]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "add" and call.type == "function"
    import json

    assert json.loads(call.function.arguments) == {"a": 3, "b": 4}
    assert choice.message.content is None
    engine = rollout.results[0]
    assert first.usage.prompt_tokens == len(TOKENIZER.encode("3 + 4 ="))
    assert first.usage.completion_tokens == len(engine.token_ids)
    assert first.usage.total_tokens == first.usage.prompt_tokens + len(engine.token_ids)
    assert [t.logprob for t in choice.logprobs.content] == pytest.approx(list(engine.logprobs))
    assert [t.token for t in choice.logprobs.content] == [
        TOKENIZER.decode([t]) for t in engine.token_ids
    ]
    assert choice.model_extra["token_ids"] == list(engine.token_ids)
    second = got["second"].choices[0]
    assert second.message.content == "7" and second.finish_reason == "stop"
    assert second.logprobs is None
    # the second request's context: prompt, the engine's call tokens, the rendered tool turn
    assert rollout.requests[1].prompt_ids == (
        *TOKENIZER.encode("3 + 4 ="),
        *engine.token_ids,
        *ids("<tool_response> 7 </tool_response>"),
    )
    assert out["agent_turns"][0] == 2


def test_n_choices_branch_and_the_agent_continues_the_one_it_picked() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: list[Any] = [{"role": "user", "content": row["raw_prompt"]}]
        reply = c.chat.completions.create(model="policy", messages=messages, n=3)
        got["reply"] = reply
        picked = next(ch for ch in reply.choices if ch.message.tool_calls)  # seed 1: a call
        messages.append(picked.message.model_dump(exclude_none=True))
        call = picked.message.tool_calls[0]
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "7"})
        got["second"] = c.chat.completions.create(model="policy", messages=messages)

    rollout, out = serve(agent, seed_offset=1)  # seeds 1, 2, 3: answer, call, answer
    reply = got["reply"]
    assert len(reply.choices) == 3 and [c.index for c in reply.choices] == [0, 1, 2]
    assert [c.finish_reason for c in reply.choices] == ["stop", "tool_calls", "stop"]
    assert len({r.seed for r in rollout.requests[:3]}) == 3
    assert reply.usage.completion_tokens == sum(len(r.token_ids) for r in rollout.results[:3])
    # the trajectory is the picked branch: its call, the tool turn, the answer
    call_ids = list(rollout.results[1].token_ids)
    segments = out["agent_trajectory"][0]["segments"]
    assert [s["trained"] for s in segments] == [True, False, True]
    assert segments[0]["token_ids"] == call_ids
    assert rollout.requests[3].prompt_ids[-len(segments[1]["token_ids"]) :] == tuple(
        segments[1]["token_ids"]
    )


def test_stop_strings_cut_the_content_and_the_kept_tokens() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        got["reply"] = client(base_url).chat.completions.create(
            model="policy",
            messages=[{"role": "user", "content": row["raw_prompt"]}],
            stop=["1 2"],
        )

    _, out = serve(agent, seed_offset=5)  # "5 1 2 </s>"
    choice = got["reply"].choices[0]
    assert choice.message.content == "5" and choice.finish_reason == "stop"
    # kept: up to the token that completes the stop string; the engine's later tokens dropped
    kept = ids("5 1 2")
    assert out["agent_trajectory"][0]["segments"][0]["token_ids"] == kept
    assert choice.model_extra["token_ids"] == kept
    assert got["reply"].usage.completion_tokens == len(kept)


def test_max_tokens_and_temperature_reach_the_request() -> None:
    def agent(base_url: str, row: dict[str, Any]) -> None:
        client(base_url).chat.completions.create(
            model="policy",
            messages=[{"role": "user", "content": row["raw_prompt"]}],
            max_completion_tokens=3,
            temperature=0.5,
            top_p=0.9,
        )

    rollout, _ = serve(agent)
    (request,) = rollout.requests
    assert (request.max_new_tokens, request.temperature, request.top_p) == (3, 0.5, 0.9)


def test_bad_parameters_are_400s_that_say_what_was_wrong() -> None:
    errors: list[Any] = []

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages = [{"role": "user", "content": row["raw_prompt"]}]
        bad_ones: list[dict[str, Any]] = [
            {"n": 0},
            {"temperature": 7},
            {"logprobs": True, "top_logprobs": 2},
            {"stop": [""]},
            {"stop": 5},
            {"stop": ["a", "b", "c", "d", "e"]},
            {"max_completion_tokens": 0},
        ]
        for bad in bad_ones:
            try:
                c.chat.completions.create(model="policy", messages=messages, **bad)
            except openai.BadRequestError as err:
                errors.append(err)
        c.chat.completions.create(model="policy", messages=messages)

    _, out = serve(agent)
    assert len(errors) == 7
    assert "n=0" in errors[0].message and "temperature=7" in errors[1].message
    assert "top_logprobs=2 is not served" in errors[2].message
    assert all("up to 4 non-empty strings" in e.message for e in errors[3:6])
    # named by the key that sent it
    assert "max_completion_tokens=0;" in errors[6].message
    assert errors[6].body["param"] == "max_completion_tokens"
    assert out["agent_trajectory"][0]["finish"] != "dropped"


FUNCTION = {"name": "mul", "parameters": {"type": "object", "properties": {}}}
"""A legacy ``functions`` entry."""


def test_parameters_the_engine_does_not_apply_are_refused_not_ignored() -> None:
    """A logit bias, a penalty, a JSON response format or a required tool changed nothing
    the engine sampled; each is a 400 naming it. Their no-op values pass."""
    errors: list[Any] = []
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages = [{"role": "user", "content": row["raw_prompt"]}]
        for bad in (
            {"logit_bias": {"2": -100}},
            {"presence_penalty": 1.0},
            {"frequency_penalty": 0.5},
            {"response_format": {"type": "json_object"}},
            {"tool_choice": "required"},
            {"functions": [FUNCTION]},
            {"function_call": {"name": "mul"}},
            {"parallel_tool_calls": False},
            {"reasoning_effort": "low"},
            # vLLM's sampling extras, as the SDK sends them
            {"extra_body": {"top_k": 1}},
            {"extra_body": {"min_p": 0.5}},
            {"extra_body": {"repetition_penalty": 1.5}},
            {"extra_body": {"min_tokens": 5}},
            {"extra_body": {"ignore_eos": True}},
            {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
        ):
            try:
                c.chat.completions.create(model="policy", messages=messages, **bad)
            except openai.BadRequestError as err:
                errors.append(err)
        neutral = {"presence_penalty": 0, "logit_bias": {}, "response_format": {"type": "text"}}
        neutral_extras = {"top_k": -1, "min_p": 0, "repetition_penalty": 1, "min_tokens": 0,
                          "ignore_eos": False, "chat_template_kwargs": {}}  # fmt: skip
        # An explicit null max_completion_tokens leaves max_tokens in force.
        got["reply"] = c.chat.completions.create(
            model="policy",
            messages=messages,
            max_tokens=1,
            max_completion_tokens=None,
            parallel_tool_calls=True,
            function_call="auto",
            extra_body=neutral_extras,
            **neutral,
        )

    serve(agent, seed_offset=1)
    names = ["logit_bias", "presence_penalty", "frequency_penalty", "response_format",
             "tool_choice", "functions", "function_call", "parallel_tool_calls",
             "reasoning_effort", "top_k", "min_p", "repetition_penalty", "min_tokens",
             "ignore_eos", "chat_template_kwargs"]  # fmt: skip
    assert [e.body["param"] for e in errors] == names
    assert all("is not served" in e.message for e in errors)
    assert got["reply"].usage.completion_tokens == 1


def test_draws_past_a_trajectorys_seed_slots_do_not_reach_the_next_ones() -> None:
    """Trajectory seeds are max_turns apart: seed + draw for more draws sampled the next
    trajectory's tokens (one GRPO group held copies)."""
    from hfsdk_agents.gateway.session import draw_seed

    slots, first, second = 2, 100, 102
    assert [draw_seed(first, k, slots) for k in range(slots)] == [100, 101]
    later = {draw_seed(first, k, slots) for k in range(slots, 200)}
    assert len(later) == 198 and not later & set(range(second, second + slots))


def test_max_turns_counts_every_segment_and_resend() -> None:
    """A resent first request starts a new segment; each used to get max_turns of its own,
    so an agent that resent it 30 times trained 30 rows under max_turns=2."""
    refused: list[Any] = []

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages = [{"role": "user", "content": row["raw_prompt"]}]
        for _ in range(5):
            try:
                c.chat.completions.create(model="policy", messages=messages)
            except openai.BadRequestError as err:
                refused.append(err)

    _, out = serve(agent, seed_offset=1, max_turns=2)
    assert len(refused) == 3 and refused[0].body["code"] == "max_turns_exceeded"
    assert [t["finish"] for t in out["agent_trajectory"]] == ["segment", "max_turns"]


@pytest.mark.parametrize("returned", ["float32", "int64"])
def test_a_numpy_scalar_reward_is_a_reward(returned: str) -> None:
    import numpy as np

    value = {"float32": np.float32(0.5), "int64": np.int64(1)}[returned]

    def agent(base_url: str, row: dict[str, Any]) -> Any:
        client(base_url).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": row["raw_prompt"]}]
        )
        return value

    _, out = serve(agent, seed_offset=1)
    (trajectory,) = out["agent_trajectory"]
    assert trajectory["finish"] != "dropped", trajectory["extra"].get("agent_dropped")
    assert trajectory["extra"]["agent_reward"] == float(value)


def test_malformed_messages_after_max_turns_keep_the_trajectory() -> None:
    refused: list[str] = []

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: Any = [{"role": "user", "content": row["raw_prompt"]}]
        c.chat.completions.create(model="policy", messages=messages)
        for sent in (messages, [{"role": "robot", "content": "?"}]):  # max_turns, malformed
            try:
                c.chat.completions.create(model="policy", messages=sent)
            except openai.BadRequestError as err:
                refused.append(err.body["code"])  # type: ignore[index]

    _, out = serve(agent, seed_offset=1, max_turns=1)
    assert refused == ["max_turns_exceeded", "malformed_messages"]
    (trajectory,) = out["agent_trajectory"]
    assert trajectory["finish"] == "max_turns" and out["response_mask"].sum() > 0


def test_an_endpoint_not_served_on_a_live_session_says_so() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        try:
            client(base_url).responses.create(model="policy", input=row["raw_prompt"])
        except openai.NotFoundError as err:
            got["error"] = err

    serve(agent)
    assert got["error"].body["code"] == "unsupported_endpoint"
    assert "/v1/responses is not served" in got["error"].message


def test_streamed_answers_are_what_the_sdk_assembles_into_the_unstreamed_ones() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        messages: list[Any] = [{"role": "user", "content": row["raw_prompt"]}]
        got["chunks"] = list(
            c.chat.completions.create(
                model="policy",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        calls = [d for ch in got["chunks"] for c in ch.choices for d in c.delta.tool_calls or []]
        (call,) = calls
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call.model_dump(exclude={"index"})],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "7"})
        with c.chat.completions.stream(model="policy", messages=messages, logprobs=True) as s:
            got["final"] = s.get_final_completion()

    rollout, out = serve(agent, seed_offset=0)  # seed 0: a call first, then "7"
    import json

    chunks = got["chunks"]
    (call,) = [d for ch in chunks for c in ch.choices for d in c.delta.tool_calls or []]
    assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 3, "b": 4}
    assert [c.finish_reason for ch in chunks for c in ch.choices if c.finish_reason] == [
        "tool_calls"
    ]
    engine = rollout.results[0]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(engine.token_ids)
    final = got["final"].choices[0]
    assert final.message.content == "7" and final.finish_reason == "stop"
    assert [t.logprob for t in final.logprobs.content] == pytest.approx(
        list(rollout.results[1].logprobs)
    )
    # streaming changes nothing the run trains on: the same context as unstreamed requests
    assert rollout.requests[1].prompt_ids == (
        *TOKENIZER.encode("3 + 4 ="),
        *engine.token_ids,
        *ids("<tool_response> 7 </tool_response>"),
    )
    assert out["agent_turns"][0] == 2


def test_completions_by_text_and_by_token_ids() -> None:
    got: dict[str, Any] = {}

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        first = c.completions.create(model="policy", prompt=row["raw_prompt"], logprobs=1)
        got["first"] = first
        text = row["raw_prompt"] + " " + first.choices[0].text
        got["second"] = c.completions.create(
            model="policy", prompt=text + " <tool_response> 7 </tool_response>"
        )

    rollout, out = serve(agent)
    first = got["first"].choices[0]
    engine = rollout.results[0]
    assert first.logprobs.token_logprobs == pytest.approx(list(engine.logprobs))
    assert first.model_extra["token_ids"] == list(engine.token_ids)
    segments = out["agent_trajectory"][0]["segments"]
    assert [s["trained"] for s in segments] == [True, False, True]
    assert segments[0]["token_ids"] == list(engine.token_ids)


def test_token_ids_outside_the_vocabulary_are_refused_before_the_engine() -> None:
    errors: list[Any] = []

    def agent(base_url: str, row: dict[str, Any]) -> None:
        c = client(base_url)
        for bad in ([len(TOKENIZER)], [-1], [True]):
            try:
                c.completions.create(model="policy", prompt=[*ids(row["raw_prompt"]), *bad])
            except openai.BadRequestError as err:
                errors.append(err)
        c.completions.create(model="policy", prompt=ids(row["raw_prompt"]))

    rollout, out = serve(agent)
    assert len(errors) == 3 and len(rollout.requests) == 1  # none of them reached the engine
    assert f"token id {len(TOKENIZER)} is outside the vocabulary" in errors[0].message
    assert "token id -1 is outside" in errors[1].message
    assert "a list of token ids" in errors[2].message
    assert out["agent_trajectory"][0]["finish"] != "dropped"


def test_a_streamed_tool_call_carries_its_log_probs() -> None:
    """Log-probs went out only with a content chunk: a streamed call turn had none."""
    import json

    from hfsdk_agents.gateway.streaming import chat_events

    logprobs = {"content": [{"token": "x", "logprob": -0.5, "bytes": None, "top_logprobs": []}]}
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    body = {
        "id": "r", "created": 0, "model": "policy", "usage": {},
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                     "tool_calls": [call]}, "logprobs": logprobs,
                     "finish_reason": "tool_calls", "token_ids": [1]}],
    }  # fmt: skip
    events = [json.loads(e[6:]) for e in chat_events(body, include_usage=False) if "{" in e]
    (part,) = [c for e in events for c in e["choices"] if "tool_calls" in c["delta"]]
    assert part["logprobs"] == logprobs
