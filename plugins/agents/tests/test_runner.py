"""The agent runner end to end on a scripted rollout: masks, token ids, tool failures, budget."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk import generate_rollout
from hfsdk_agents.tool_use.build import ToolUseSpec, train_tokenizer
from hfsdk_agents.tool_use.task import call_text, tool_use_reward

from .fakes import ScriptedRollout, prompt_batch, rollout_for, word_tokenizer

TOKENIZER = train_tokenizer(ToolUseSpec())


def ids(text: str) -> list[int]:
    return TOKENIZER.encode(text, add_special_tokens=False)


EOS = TOKENIZER.eos_token_id


def calculator_script(context: list[int]) -> list[int]:
    """Calls add(3, 4), then copies the tool's answer; keeps talking past the call end."""
    if ids("</tool_response>")[0] in context:
        answer = context[context.index(ids("<tool_response>")[0]) + 1]
        return [answer, EOS, *ids("1 2")]
    return [*ids(call_text(3, 4)), *ids("5 6")]  # tokens after </tool_call> are cut


def test_masks_and_ids_exact_on_a_tool_trajectory() -> None:
    rollout = rollout_for(
        TOKENIZER, calculator_script, tools=["add"], renderer="plain", max_response_tokens=32
    )
    out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 =", "1 + 1 ="]))
    call, tool, answer = (
        ids(call_text(3, 4)),
        ids("<tool_response> 7 </tool_response>"),
        [*ids("7"), EOS],
    )
    expected = [*call, *tool, *answer]
    mask = [1] * len(call) + [0] * len(tool) + [1] * len(answer)
    width = 32
    assert out["responses"].shape == (2, width)
    assert out["responses"][0, : len(expected)].tolist() == expected
    assert out["responses"][0, len(expected) :].eq(TOKENIZER.pad_token_id).all()
    assert out["response_mask"][0].tolist() == mask + [0] * (width - len(mask))
    prompt_mask = out["attention_mask"][0, :-width].tolist()
    assert out["attention_mask"][0, -width:].tolist() == [1] * len(expected) + [0] * (
        width - len(expected)
    )
    assert sum(prompt_mask) == len(TOKENIZER.encode("3 + 4 ="))
    # rollout log-probs: -0.1 * (position in its turn + 1) on model tokens, 0 on tool tokens
    lp = out["rollout_log_probs"][0].tolist()
    turn1 = [-0.1 * (i + 1) for i in range(len(call))]
    turn2 = [-0.1 * (i + 1) for i in range(len(answer))]
    want = turn1 + [0.0] * len(tool) + turn2
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(lp, want, strict=False))
    assert list(out["agent_turns"]) == [2, 2]
    assert list(out["agent_tool_calls"]) == [1, 1]
    assert list(out["agent_tool_errors"]) == [0, 0]
    # the second turn's request was the whole context, token for token
    assert rollout.contexts[-1] == [*TOKENIZER.encode("1 + 1 ="), *call, *tool]
    # the reward reads the answer after the tool response
    assert tool_use_reward(["3 + 4 ="], [out["response_text"][0]]) == [1.0]
    metrics = out.meta["rollout_metrics"]
    assert metrics["agent/turns_mean"] == 2.0
    assert metrics["agent/tool_call_success"] == 1.0
    share = len(tool) / len(expected)
    assert math.isclose(metrics["agent/context_token_share"], share, rel_tol=1e-9)
    # two turns, each batched over both trajectories: two generate calls, not four
    assert rollout.calls == 2


def test_score_lands_on_the_last_model_token() -> None:
    from hfsdk.core.batch import Batch
    from hfsdk_testing import FakeRun

    run = FakeRun.for_algorithm("grpo", rewards=[1.0, 0.5])
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
    batch = Batch.from_dict(
        tensors={"response_mask": mask}, non_tensors={"response_text": ["sampled"] * 2}
    )
    scores = run.algorithm.score(batch, "reward")
    # row 0: the tool tokens (2, 3) are a hole; the score goes on its last model token (4)
    assert scores.tolist() == [[0, 0, 0, 0, 1.0, 0], [0, 0, 0.5, 0, 0, 0]]


def test_token_ids_are_kept_where_decode_then_encode_differs() -> None:
    tok = word_tokenizer(["1", "2", "12", "+", "="], fuse=True)
    one, two = tok.convert_tokens_to_ids(["1", "2"])
    assert tok.encode(tok.decode([one, two]), add_special_tokens=False) != [one, two]
    rollout = rollout_for(
        tok,
        lambda _ctx: [one, two, tok.eos_token_id],
        tools=["add"],
        renderer="plain",
        max_response_tokens=8,
    )
    out = generate_rollout(rollout, prompt_batch(tok, ["1 + 2 ="]))
    assert out["responses"][0, :3].tolist() == [one, two, tok.eos_token_id]
    assert out["response_mask"][0, :3].tolist() == [1.0, 1.0, 1.0]
    assert out["response_text"][0] == "12"


def failing_script(context: list[int]) -> list[int]:
    if ids("</tool_response>")[0] in context:
        return [*ids("7"), EOS]
    return ids(call_text(3, 4))


def test_raising_hanging_and_oversized_tools_give_error_turns(tmp_path) -> None:
    path = tmp_path / "bad.py"
    path.write_text(
        "import time\n"
        "def raises(a: int, b: int) -> int:\n    raise RuntimeError('broken')\n"
        "def hangs(a: int, b: int) -> int:\n    time.sleep(30)\n    return 0\n"
        "def floods(a: int, b: int) -> str:\n    return 'x ' * 5000\n"
    )
    for name, kind in (("raises", "exception"), ("hangs", "timeout"), ("floods", "too_long")):
        rollout = rollout_for(
            TOKENIZER,
            failing_script,
            renderer="plain",
            max_response_tokens=64,
            tools=[{"fn": f"{path}:{name}", "name": "add"}],
            tool_timeout_s=0.3,
            max_tool_output_chars=20,
        )
        out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))
        trajectory = out["agent_trajectory"][0]
        roles = [s["role"] for s in trajectory["segments"]]
        assert roles == ["assistant", "tool", "assistant"], name
        (result,) = trajectory["segments"][1]["tool_results"]
        assert (result["ok"], result["error"]) == (False, kind)
        assert result["content"].startswith("Error:") or kind == "too_long"
        assert trajectory["finish"] == "stop"
        assert list(out["agent_tool_errors"]) == [1]
        assert out.meta["rollout_metrics"]["agent/tool_call_success"] == 0.0


def test_budget_and_max_turns_end_trajectories() -> None:
    always_call = lambda _ctx: ids(call_text(3, 4))  # noqa: E731
    rollout = rollout_for(
        TOKENIZER, always_call, tools=["add"], renderer="plain", max_turns=3, max_response_tokens=64
    )
    out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))
    assert out["agent_trajectory"][0]["finish"] == "max_turns"
    assert list(out["agent_turns"]) == [3]
    rollout = rollout_for(
        TOKENIZER,
        always_call,
        tools=["add"],
        renderer="plain",
        max_turns=5,
        max_response_tokens=len(ids(call_text(3, 4))) + 2,
    )
    out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))
    assert out["agent_trajectory"][0]["finish"] == "budget"
    assert out["response_mask"][0].sum() == len(ids(call_text(3, 4)))


def test_a_call_that_ran_counts_when_its_tool_turn_does_not_fit() -> None:
    """The tool runs before its turn's length is known; a turn over the budget is dropped,
    but the call happened (side effects, time), so the metrics count it."""
    rollout = rollout_for(
        TOKENIZER,
        lambda _ctx: ids(call_text(3, 4)),
        tools=["add"],
        renderer="plain",
        max_turns=5,
        max_response_tokens=len(ids(call_text(3, 4))) + 2,  # no room for the tool turn
    )
    out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))
    trajectory = out["agent_trajectory"][0]
    assert trajectory["finish"] == "budget"
    assert [s["role"] for s in trajectory["segments"]] == ["assistant"]
    assert list(out["agent_tool_calls"]) == [1]
    assert list(out["agent_tool_errors"]) == [0]
    assert out.meta["rollout_metrics"]["agent/tool_calls_per_trajectory"] == 1.0
    (result,) = trajectory["dropped_tool_results"]
    assert (result["name"], result["content"], result["ok"]) == ("add", "7", True)


def test_advantages_and_kl_are_zero_on_tool_tokens() -> None:
    from hfsdk.core.maths.kl import token_kl
    from hfsdk_testing import FakeRun

    rollout = rollout_for(
        TOKENIZER, calculator_script, tools=["add"], renderer="plain", max_response_tokens=32
    )
    out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 =", "1 + 1 ="]))
    out["uid"] = [0, 0]
    run = FakeRun.for_algorithm("grpo", rewards=[1.0, 0.0])
    out["token_level_scores"] = run.algorithm.score(out, "reward")
    out["token_level_rewards"] = out["token_level_scores"]
    run.algorithm.estimate_advantages(out)
    mask = out["response_mask"].bool()
    present = out["attention_mask"][:, -32:].bool()
    tool_tokens = present & ~mask
    assert tool_tokens.sum() == 6  # three per trajectory
    assert out["advantages"][tool_tokens].abs().max() == 0
    assert (out["advantages"][mask] != 0).all()  # one right, one wrong: both carry signal
    kl = token_kl(
        out["rollout_log_probs"],
        torch.zeros_like(out["rollout_log_probs"]),
        out["response_mask"],
        "k1",
    )
    assert kl[tool_tokens].abs().max() == 0 and kl[mask].abs().min() > 0


class RequestRollout(ScriptedRollout):
    """Serves the calculator script request by request (as vLLM does), keeping each request."""

    serves_requests = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list = []

    async def generate_request(self, request):
        import asyncio

        from hfsdk_agents.requests import cut_at_stop

        self.seen.append(request)
        await asyncio.sleep(0)
        ids = calculator_script(list(request.prompt_ids))
        stops = set(request.stop_token_ids)
        return cut_at_stop(ids, [-0.5] * len(ids), stops, request.max_new_tokens)


def test_a_rollout_with_request_level_generation_serves_requests_itself() -> None:
    base = rollout_for(
        TOKENIZER, calculator_script, tools=["add"], renderer="plain", max_response_tokens=32
    )
    rollout = RequestRollout(base.config, base.actor, calculator_script)
    out = generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 =", "1 + 1 ="]))
    assert rollout.calls == 0  # generate_sequences never called
    assert len(rollout.seen) == 4  # two turns of two trajectories
    first = rollout.seen[0]
    assert first.stop_token_ids and TOKENIZER.convert_tokens_to_ids("</tool_call>") in (
        first.stop_token_ids
    )
    assert first.max_new_tokens == 32 and not first.greedy
    assert list(out["agent_turns"]) == [2, 2]
    # the backend stopped at </tool_call>: nothing after the call is in the trajectory
    assert rollout.seen[2].prompt_ids[-3:] == tuple(ids("<tool_response> 7 </tool_response>"))
    assert out["rollout_log_probs"][0][out["response_mask"][0].bool()].eq(-0.5).all()


def test_every_sampling_setting_reaches_a_request_serving_rollout() -> None:
    """rollout.top_k was dropped from multi-turn requests: vLLM sampled with no top-k cut,
    where the same config through generate_sequences had one."""
    from hfsdk_backend_common.rollout_config import HFRolloutConfig

    base = rollout_for(
        TOKENIZER, calculator_script, tools=["add"], renderer="plain", max_response_tokens=32
    )
    # The hf rollout's settings (vLLM's config extends them), with the same multi-turn section.
    config = HFRolloutConfig(
        subsections=base.config.subsections, temperature=0.7, top_p=0.9, top_k=5
    )
    rollout = RequestRollout(config, base.actor, calculator_script)
    generate_rollout(rollout, prompt_batch(TOKENIZER, ["3 + 4 ="]))
    seen = rollout.seen[0]
    assert (seen.temperature, seen.top_p, seen.top_k) == (0.7, 0.9, 5)


def test_response_text_is_the_text_of_the_truncated_tensors() -> None:
    from hfsdk_agents.runner import assemble
    from hfsdk_agents.trajectory import Segment, Trajectory

    prompts = prompt_batch(TOKENIZER, ["3 + 4 ="])
    kept, cut = ids("7 7"), ids("1 2 3")
    trajectory = Trajectory(prompt_ids=tuple(TOKENIZER.encode("3 + 4 =")))  # the row's own prompt
    trajectory.add(
        Segment(
            role="assistant",
            token_ids=tuple(kept + cut),
            trainable=True,
            logprobs=tuple([-0.1] * (len(kept) + len(cut))),
        )
    )
    out = assemble(
        prompts,
        [trajectory],
        tokenizer=TOKENIZER,
        width=len(kept),
        temperature=1.0,
        greedy=False,
        metrics={},
    )
    assert out["responses"][0].tolist() == kept
    assert out["response_text"][0] == TOKENIZER.decode(kept, skip_special_tokens=True)


def test_a_call_left_unanswered_is_no_answer() -> None:
    """The number after the last tool response is the answer; a call after it is not one,
    nor are its arguments (a model could otherwise be paid for a dangling call)."""
    answered = call_text(17, 25) + " <tool_response> 42 </tool_response>"
    assert tool_use_reward(["17 + 25 ="], [answered + " 42"]) == [1.0]
    assert tool_use_reward(["17 + 25 ="], [answered + " " + call_text(42, 0)]) == [0.0]
    assert tool_use_reward(["17 + 25 ="], [call_text(17, 25)]) == [0.0]


def test_a_decimal_or_non_ascii_answer_is_not_the_integer_sum() -> None:
    """Before: ``-?\\d+`` read "42.9" as 42 and the Arabic-Indic "٤٢" as 42 (reward 1.0)."""
    answered = call_text(17, 25) + " <tool_response> 42 </tool_response>"
    responses = [
        answered + " 42.9",
        answered + " \u0664\u0662",
        answered + " 42.0",
        answered + " 42.",
    ]
    assert tool_use_reward(["17 + 25 ="] * 4, responses) == [0.0, 0.0, 1.0, 1.0]


def test_a_deadline_in_one_blocking_trajectory_stops_them_all() -> None:
    """A trajectory blocking the event loop (an environment's sync reset) is interrupted by
    its deadline; the trajectories after it must not start, or the next one's reset would
    hang the loop again with the deadline spent (the run then ignored every signal)."""
    import asyncio
    import time

    from hfsdk import DeadlineExceeded, deadline
    from hfsdk_agents.runner import run_agents

    started: list[int] = []

    class Blocking:
        async def run(self, prompt, row, ctx, *, seed):
            started.append(seed)
            time.sleep(30)  # blocks the event loop, as a sync reset does

    begun = time.monotonic()
    with pytest.raises(DeadlineExceeded), deadline(0.5, "rollout", log_stack=False):
        asyncio.run(run_agents(Blocking(), None, [(1,)] * 3, [{}] * 3, [0, 1, 2], max_concurrent=3))
    assert started == [0] and time.monotonic() - begun < 10


def test_a_turn_cut_by_the_trajectory_budget_finishes_budget_not_length() -> None:
    """A model that never stops: its one turn is cut by max_response_tokens, so the metric of
    trajectories stopped by the budget counts it; a cut by max_tokens_per_turn stays length."""
    tok = word_tokenizer(["q", "a"])
    a = tok.convert_tokens_to_ids("a")
    for per_turn, finish, share in ((None, "budget", 1.0), (4, "length", 0.0)):
        rollout = rollout_for(
            tok,
            lambda _ctx: [a] * 16,
            width=16,
            tools=["add"],
            renderer="plain",
            max_response_tokens=8,
            max_tokens_per_turn=per_turn,
        )
        out = generate_rollout(rollout, prompt_batch(tok, ["q", "q"]))
        assert [t["finish"] for t in out["agent_trajectory"]] == [finish] * 2, per_turn
        assert out.meta["rollout_metrics"]["agent/budget_finish_share"] == share


def test_a_turn_cut_by_the_rollouts_own_length_limit_stays_length() -> None:
    """The rollout decodes at most 4 tokens a call (its max_response_length) and the budget is
    64: the turn is cut with budget left over, so it is a length cut, not a budget one."""
    tok = word_tokenizer(["q", "a"])
    a = tok.convert_tokens_to_ids("a")
    rollout = rollout_for(
        tok, lambda _ctx: [a] * 16, width=4, tools=["add"], renderer="plain", max_response_tokens=64
    )
    out = generate_rollout(rollout, prompt_batch(tok, ["q"]))
    trajectory = out["agent_trajectory"][0]
    assert trajectory["finish"] == "length"
    assert trajectory["segments"][0]["finish_reason"] == "length"
    assert out.meta["rollout_metrics"]["agent/budget_finish_share"] == 0.0


def test_each_trajectorys_row_copies_containers_and_shares_the_rest() -> None:
    # A deepcopy of a row with decoded images cost 11-89 ms per trajectory on the event
    # loop every trajectory shares; an image, bytes or a string cannot change in place.
    import numpy as np
    from PIL import Image

    from hfsdk_agents.runner import _own_copy

    image = Image.new("RGB", (8, 8))
    shared = [1, 2]
    row = {
        "images": [image, {"bytes": b"png", "path": None}],
        "meta": {"tags": shared, "seen": {1}},
        "pair": (shared, "text"),
        "frozen": ("a", 1),
        "feat": np.zeros(3),
        "messages": np.array([{"role": "user", "content": "q"}], dtype=object),
    }
    row["again"] = shared  # one list under two keys stays one list in the copy
    own = _own_copy(row)
    assert own == {k: v for k, v in row.items() if k not in ("feat", "messages")} | {
        "feat": own["feat"],
        "messages": own["messages"],
    }
    assert own["images"][0] is image  # shared: nothing changes it in place
    assert own["images"][1]["bytes"] is row["images"][1]["bytes"]
    assert own["frozen"] is row["frozen"]
    for mutable in (own["images"], own["images"][1], own["meta"], own["meta"]["tags"]):
        assert all(mutable is not v for v in (row["images"], row["images"][1], row["meta"], shared))
    assert own["meta"]["seen"] is not row["meta"]["seen"]
    assert own["pair"][0] is not shared and own["pair"][0] is own["meta"]["tags"]
    assert own["again"] is own["meta"]["tags"]
    own["feat"][0] = 1.0
    own["messages"][0]["content"] = "changed"
    assert row["feat"][0] == 0.0 and row["messages"][0]["content"] == "q"
