"""The runner's rows for a trajectory's segments: prompt kept, re-rendered context carried."""

from __future__ import annotations

import asyncio

import pytest

from hfsdk import HfsdkError
from hfsdk_agents.loops import AgentLoop
from hfsdk_agents.runner import as_segments, assemble
from hfsdk_agents.tool_use.build import ToolUseSpec, train_tokenizer
from hfsdk_agents.trajectory import Segment, Trajectory

from .fakes import prompt_batch

TOK = train_tokenizer(ToolUseSpec())


def ids(text: str) -> tuple[int, ...]:
    return tuple(TOK.encode(text, add_special_tokens=False))


def model(text: str) -> Segment:
    return Segment(role="assistant", token_ids=ids(text), trainable=True, logprobs=(-0.5,) * 2)


def test_a_later_segment_keeps_the_shared_prompt_and_carries_the_rest() -> None:
    prompts = prompt_batch(TOK, ["3 + 4 ="])
    row_prompt = tuple(TOK.encode("3 + 4 ="))
    first = Trajectory(prompt_ids=row_prompt)
    first.add(model("1 2"))
    # a rewritten context that shares only "<s> 3" with the row's prompt
    rewritten = (*row_prompt[:2], *ids("5 + 6 = 7"))
    second = first.follow(rewritten)
    second.add(model("8 9"))
    assert first.finish == "segment" and second.carried == len(rewritten) - 2
    out = assemble(
        prompts,
        [[first, second]],
        tokenizer=TOK,
        width=12,
        temperature=1.0,
        greedy=False,
        metrics={},
    )
    assert list(out["segment_index"]) == [0, 1]
    width = out["prompts"].shape[1]
    assert out["prompts"].shape == (2, len(row_prompt)) and width == len(row_prompt)
    kept = out["prompts"][1][out["attention_mask"][1, :width].bool()].tolist()
    assert kept == list(row_prompt[:2])  # only the shared part stays in the prompt
    present = out["attention_mask"][1, width:].bool()
    response = out["responses"][1][present].tolist()
    assert response == [*ids("5 + 6 = 7"), *ids("8 9")]
    assert out["response_mask"][1][present].tolist() == [0.0] * 5 + [1.0] * 2
    assert out["rollout_log_probs"][1][present].tolist() == [0.0] * 5 + [-0.5] * 2
    # the whole row is the rewritten context the model saw, then its turn
    row = out["input_ids"][1][out["attention_mask"][1].bool()].tolist()
    assert row == [*rewritten, *ids("8 9")]
    # the first segment's row is the prompt and its own turn
    assert out["input_ids"][0][out["attention_mask"][0].bool()].tolist() == [
        *row_prompt,
        *ids("1 2"),
    ]


class _Returns(AgentLoop):
    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value

    async def run(self, prompt_ids, row, ctx, *, seed):  # type: ignore[override]
        return self.value


@pytest.mark.parametrize("value", [None, [], ["x"], "trajectory"])
def test_a_loop_returning_no_trajectory_is_refused_in_one_line(value: object) -> None:
    loop = _Returns(value)
    made = asyncio.run(loop.run((1,), {}, None, seed=0))  # type: ignore[arg-type]
    with pytest.raises(HfsdkError, match="expected a Trajectory or a non-empty list") as info:
        as_segments(made, loop)
    assert "\n" not in str(info.value)


def test_segments_without_a_model_token_are_dropped() -> None:
    first = Trajectory(prompt_ids=(1, 2))
    first.add(model("1 2"))
    context_only = first.follow((1, 2, 7))
    assert as_segments([first, context_only], _Returns(None)) == [first]
    assert as_segments([context_only], _Returns(None)) == [context_only]
