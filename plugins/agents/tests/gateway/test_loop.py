"""The gateway loop end to end on a scripted engine: the openai SDK against the gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from hfsdk import generate_rollout
from hfsdk_agents.tool_use.build import ToolUseSpec, train_tokenizer
from hfsdk_agents.tool_use.task import call_text, tool_use_reward

from ..fakes import prompt_batch, rollout_for
from . import agents_for_tests
from .helpers import request_rollout

TOKENIZER = train_tokenizer(ToolUseSpec())
EOS = TOKENIZER.eos_token_id
AGENTS = Path(agents_for_tests.__file__)


def ids(text: str) -> list[int]:
    return TOKENIZER.encode(text, add_special_tokens=False)


def calculator(context: list[int], seed: int = 0) -> list[int]:
    """Calls add(3, 4), then copies the tool's answer; talks on past the call's end."""
    if ids("</tool_response>")[0] in context:
        answer = context[context.index(ids("<tool_response>")[0]) + 1]
        return [answer, EOS, *ids("1 2")]
    return [*ids(call_text(3, 4)), *ids("5 6")]


def test_the_tool_use_agent_gives_the_tool_loops_tokens_and_the_engines_logprobs() -> None:
    prompts = ["3 + 4 =", "1 + 1 ="]
    gateway = request_rollout(
        TOKENIZER, calculator, agent="tool_use", renderer="plain", max_response_tokens=32
    )
    out = generate_rollout(gateway, prompt_batch(TOKENIZER, prompts))
    loop = rollout_for(
        TOKENIZER, calculator, tools=["add"], renderer="plain", max_response_tokens=32
    )
    want = generate_rollout(loop, prompt_batch(TOKENIZER, prompts))
    # the same rendering as the built-in tool loop, token for token and mask for mask
    assert out["responses"].tolist() == want["responses"].tolist()
    assert out["response_mask"].tolist() == want["response_mask"].tolist()
    assert out["attention_mask"].tolist() == want["attention_mask"].tolist()
    assert list(out["agent_turns"]) == [2, 2]
    # each model segment is one engine result as returned: ids and log-probs, for the
    # request whose context was the prompt and everything before the segment
    assert len(gateway.results) == 4
    answered = {r.prompt_ids: res for r, res in zip(gateway.requests, gateway.results, strict=True)}
    for row, prompt in enumerate(prompts):
        context = list(TOKENIZER.encode(prompt))
        at = 0
        for segment in out["agent_trajectory"][row]["segments"]:
            n = len(segment["token_ids"])
            if segment["trained"]:
                result = answered[tuple(context)]
                assert segment["token_ids"] == list(result.token_ids)
                lps = out["rollout_log_probs"][row][at : at + n].tolist()
                assert lps == pytest.approx(list(result.logprobs), abs=1e-6)
            context += segment["token_ids"]
            at += n
        assert out["responses"][row][:at].tolist() == context[len(TOKENIZER.encode(prompt)) :]
    assert tool_use_reward(prompts[:1], [out["response_text"][0]]) == [1.0]
    # the tool messages the agent sent back count as the trajectory's tool calls
    assert list(out["agent_tool_calls"]) == [1, 1]
    assert list(out["agent_tool_errors"]) == [0, 0]
    assert out.meta["rollout_metrics"]["agent/tool_call_success"] == 1.0
    assert out.meta["rollout_metrics"]["agent/dropped"] == 0.0


def _run(agent: str, prompts: list[str], script=calculator, **multi_turn: Any):
    rollout = request_rollout(
        TOKENIZER, script, agent=agent, renderer="plain", max_response_tokens=32, **multi_turn
    )
    return rollout, generate_rollout(rollout, prompt_batch(TOKENIZER, prompts))


@pytest.mark.heavy
def test_bad_agents_drop_their_trajectories_and_the_run_goes_on(caplog) -> None:
    from hfsdk_agents.gateway.agents import load_agent

    seen = load_agent(f"{AGENTS}:by_prompt").__globals__["SEEN"]  # the file's own module
    seen.clear()
    prompts = ["ok 1 + 1 =", "raise 1 + 1 =", "hang 1 + 1 =", "silent 1 + 1 =", "malformed 1 ="]
    with caplog.at_level("WARNING"):
        _, out = _run(f"{AGENTS}:by_prompt", prompts, agent_deadline_s=8.0)
    finishes = [t["finish"] for t in out["agent_trajectory"]]
    assert finishes[0] != "dropped"
    assert finishes[1:] == ["dropped"] * 4
    reasons = [t["extra"]["agent_dropped"] for t in out["agent_trajectory"][1:]]
    assert "RuntimeError: the agent broke" in reasons[0]
    assert "within 8 s" in reasons[1]
    assert reasons[2] == "never called the model"
    assert "role 'wizard'" in reasons[3]
    # a dropped row trains on nothing; the kept one on its model tokens
    assert out["response_mask"][1:].sum() == 0
    assert out["response_mask"][0].sum() > 0
    assert out.meta["rollout_metrics"]["agent/dropped"] == pytest.approx(4 / 5)
    assert sum("dropped the trajectory" in r.message for r in caplog.records) == 4
    (err,) = seen
    assert err.status_code == 400 and err.code == "malformed_messages"


def test_rewards_returned_or_posted_reach_the_agent_reward_function() -> None:
    from hfsdk_agents.gateway.reward import agent_reward

    _, out = _run(f"{AGENTS}:by_prompt", ["ok 1 + 1 =", "posted 1 + 1 ="])
    rewards = agent_reward(["", ""], ["", ""], agent_trajectory=list(out["agent_trajectory"]))
    assert rewards == [0.75, 0.25]


def test_an_agent_that_calls_sys_exit_ends_itself_not_the_rollout() -> None:
    _, out = _run(f"{AGENTS}:exits", ["ok 1 + 1 =", "fail 1 + 1 ="])
    done, failed = out["agent_trajectory"]
    assert done["finish"] != "dropped" and out["response_mask"][0].sum() > 0
    assert failed["finish"] == "dropped"
    assert failed["extra"]["agent_dropped"] == "exited with status 3"


def test_a_non_finite_reward_drops_or_is_refused_and_the_run_goes_on() -> None:
    from hfsdk_agents.gateway.agents import load_agent

    seen = load_agent(f"{AGENTS}:by_prompt").__globals__["SEEN"]
    seen.clear()
    _, out = _run(f"{AGENTS}:by_prompt", ["infinite 1 + 1 =", "post nan 1 + 1 ="])
    returned, posted = out["agent_trajectory"]
    assert returned["finish"] == "dropped" and "returned inf" in returned["extra"]["agent_dropped"]
    assert posted["finish"] != "dropped" and "agent_reward" not in posted["extra"]
    (reply,) = seen
    assert reply.status_code == 400 and "finite number" in reply.json()["error"]["message"]


def test_an_async_agent_given_as_module_fn_runs() -> None:
    agents_for_tests.SEEN.clear()
    module = agents_for_tests.__name__
    _, out = _run(f"{module}:async_agent", ["1 + 1 ="])
    (reply,) = agents_for_tests.SEEN
    assert reply.choices[0].finish_reason == "tool_calls"
    assert out["agent_trajectory"][0]["extra"]["agent_reward"] == 0.5


def test_an_unknown_agent_is_one_line() -> None:
    from hfsdk import ConfigError

    with pytest.raises(ConfigError, match=r"not a registered agent .*tool_use"):
        _run("no_such_agent", ["1 + 1 ="])


def test_requests_for_sessions_the_gateway_did_not_open_are_refused() -> None:
    seen: dict[str, Any] = {}

    def spy(base_url: str, row: dict[str, Any]) -> None:
        seen["url"] = base_url
        port_root = base_url.split("/s/")[0]
        stranger = openai.OpenAI(base_url=f"{port_root}/s/forged/v1", api_key="x", max_retries=0)
        try:
            stranger.chat.completions.create(model="p", messages=[{"role": "user", "content": "1"}])
        except openai.NotFoundError as err:
            seen["forged"] = err
        seen["models"] = openai.OpenAI(base_url=base_url, api_key="x").models.list()
        openai.OpenAI(base_url=base_url, api_key="x", max_retries=0).chat.completions.create(
            model="p", messages=[{"role": "user", "content": row["raw_prompt"]}]
        )

    agents_for_tests.SPY = spy  # type: ignore[attr-defined]
    _run(f"{agents_for_tests.__name__}:SPY", ["1 + 1 ="])
    assert seen["forged"].code == "unknown_session"
    assert seen["forged"].body["type"] == "invalid_request_error"
    assert [m.id for m in seen["models"].data] == ["policy"]
    # after its trajectory, a session's own URL is refused too
    late = openai.OpenAI(base_url=seen["url"], api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        late.chat.completions.create(model="p", messages=[{"role": "user", "content": "1 + 1 ="}])


def test_a_config_with_a_bad_agent_is_refused_before_the_run() -> None:
    from hfsdk import ConfigError
    from hfsdk.core.config import resolve_run_config

    with pytest.raises(ConfigError, match=r"agent='nope\.py:fn'.*does not exist"):
        resolve_run_config("grpo", {"rollout": {"multi_turn": {"agent": "nope.py:fn"}}})
    with pytest.raises(ConfigError, match="drop one of them"):
        resolve_run_config(
            "grpo", {"rollout": {"multi_turn": {"agent": "tool_use", "agent_loop": "tool_loop"}}}
        )
    cfg = resolve_run_config("grpo", {"rollout": {"multi_turn": {"agent": "tool_use"}}})
    from hfsdk_agents.config import multi_turn_config

    assert multi_turn_config(cfg.rollout).loop_name == "gateway"


def test_past_max_turns_the_request_is_refused_and_the_trajectory_kept() -> None:
    # the tool_use agent asks twice; with max_turns=1 its second request is a 400 it does not
    # catch: the trajectory ends at max_turns with its first turn, not dropped
    rollout, out = _run("tool_use", ["3 + 4 ="], max_turns=1)
    (trajectory,) = out["agent_trajectory"]
    assert trajectory["finish"] == "max_turns"
    assert [s["trained"] for s in trajectory["segments"]] == [True]
    assert len(rollout.requests) == 1
    assert out.meta["rollout_metrics"]["agent/dropped"] == 0.0


@pytest.mark.parametrize("finish", [None, "max_turns", "budget"])
def test_an_agent_that_hangs_after_its_trajectory_ended_keeps_it(finish: str | None) -> None:
    from types import SimpleNamespace

    from hfsdk_agents.gateway.agents import AgentOutcome
    from hfsdk_agents.gateway.loop import drop_reason

    session: Any = SimpleNamespace(finish=finish, malformed=None, model_calls=1)
    hung = AgentOutcome(error="hung: no answer within 1 s", timed_out=True)
    # a hang before the end drops the trajectory; one after budget / max_turns keeps it
    assert drop_reason(session, hung) == (None if finish else hung.error)


def test_a_request_still_generating_when_the_step_ends_is_an_unknown_session_404() -> None:
    import asyncio
    import threading
    import time

    from .helpers import RequestRollout

    class SlowRollout(RequestRollout):
        async def generate_request(self, request: Any) -> Any:
            await asyncio.sleep(3)  # past the agent's deadline: the step ends meanwhile
            return await super().generate_request(request)

    seen: dict[str, Any] = {}
    answered = threading.Event()

    def agent(base_url: str, row: dict[str, Any]) -> None:
        import httpx

        messages = [{"role": "user", "content": row["raw_prompt"]}]
        reply = httpx.post(f"{base_url}/chat/completions", json={"messages": messages}, timeout=30)
        seen["reply"] = reply
        answered.set()

    agents_for_tests.SLOW = agent  # type: ignore[attr-defined]
    base = request_rollout(
        TOKENIZER,
        calculator,
        agent=f"{agents_for_tests.__name__}:SLOW",
        renderer="plain",
        max_response_tokens=32,
        agent_deadline_s=1.0,
    )
    rollout = SlowRollout(base.config, base.actor, lambda c: [], seeded=calculator)
    start = time.monotonic()
    generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))
    assert answered.wait(timeout=max(0.1, 4 - (time.monotonic() - start)))
    reply = seen["reply"]
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "unknown_session"


def test_a_body_python_cannot_decode_is_a_400_that_says_why() -> None:
    """A deeply nested body was a 500 "generation failed: maximum recursion depth ...", and
    an integer over Python's digit limit was called "not JSON" though it is."""
    from starlette.testclient import TestClient

    from hfsdk_agents.gateway.server import build_app

    class OpenSession:
        token, model = "tok", "policy"

        def check_open(self) -> None:
            pass

    client = TestClient(build_app({"tok": OpenSession()}), raise_server_exceptions=False)  # type: ignore[dict-item]

    def post(body: str | bytes) -> dict[str, Any]:
        reply = client.post("/s/tok/v1/chat/completions", content=body)
        assert reply.status_code == 400, reply.text
        return reply.json()["error"]

    deep = post("[" * 100_000 + "]" * 100_000)
    assert deep["code"] == "invalid_request"
    assert deep["message"].startswith("the request body is too deeply nested")
    big = post('{"messages": [], "max_tokens": ' + "9" * 5000 + "}")
    assert big["message"].startswith("the request body has an integer too large to read")
    assert post("{oops")["message"] == "the request body is not JSON; send a JSON object"
    assert post(b'{"a": "\xff"}')["message"].startswith("the request body is not JSON")
