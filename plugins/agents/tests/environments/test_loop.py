"""environment_loop on a scripted rollout: routing, per-trajectory state, errors, reward."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import torch

from hfsdk import Batch, HfsdkError, generate_rollout
from hfsdk_agents.environments.reward import environment_reward

from ..fakes import rollout_for, word_tokenizer
from . import counter_env

WORDS = [
    "go", "count", "0", "1", "2", "3", "4", "5", "6", "<tool_call>", "</tool_call>",
    '{"name":', '"bump",', '"add",', '"arguments":', '{"by":', "1}}", "2}}", "<tool_response>",
    "</tool_response>", "Error:", "done",
]  # fmt: skip
TOK = word_tokenizer(WORDS)
COUNTER = f"{counter_env.__name__}:Counter"
BROKEN = f"{counter_env.__name__}:Broken"


def ids(text: str) -> list[int]:
    return TOK.encode(text, add_special_tokens=False)


def call(name: str = "bump", by: int = 1) -> list[int]:
    return ids(f'<tool_call> {{"name": "{name}", "arguments": {{"by": {by}}}}} </tool_call>')


def batch(rows: list[dict[str, Any]]) -> Batch:
    encoded = [TOK.encode("go") for _ in rows]
    ids_t = torch.tensor(encoded)
    columns = {k: [r.get(k) for r in rows] for k in {k for r in rows for k in r}}
    return Batch.from_dict(
        tensors={"input_ids": ids_t, "attention_mask": torch.ones_like(ids_t)},
        non_tensors={"raw_prompt": ["go"] * len(rows), "uid": list(range(len(rows))), **columns},
        meta={"n": 1},
    )


def always(tokens: list[int]):
    return lambda context: tokens


def test_each_row_runs_its_own_environment_instance_and_its_reward_is_the_envs() -> None:
    rollout = rollout_for(
        TOK, always(call()), environment_column="env", renderer="plain", max_turns=6,
        max_response_tokens=200,
    )  # fmt: skip
    rows = [{"env": COUNTER, "target": 2}, {"env": COUNTER, "target": 3}, {"env": BROKEN}]
    counter_env.CLOSED.clear()
    out = generate_rollout(rollout, batch(rows))
    records = list(out["agent_trajectory"])
    # Counters stop when done (2 and 3 bumps of 1); each instance kept its own count.
    assert [r["finish"] for r in records] == ["done", "done", "max_turns"]
    assert list(out["agent_turns"]) == [2, 3, 6]
    assert sorted(counter_env.CLOSED) == ["counter:2", "counter:3"]
    first = records[0]["segments"]
    assert first[0] == {**first[0], "role": "user", "text": "count 0", "trained": False}
    assert [s["text"] for s in first[1:] if s["role"] == "tool"] == [
        "<tool_response> count 1 </tool_response>",
        "<tool_response> count 2 </tool_response>",
    ]
    # The broken tool: every call answered with its error, the trajectory went on to max_turns.
    broken = [s for s in records[2]["segments"] if s["role"] == "tool"]
    assert len(broken) == 6
    result = broken[0]["tool_results"][0]
    assert (result["ok"], result["error"]) == (False, "exception")
    assert result["content"] == "Error: bump raised ValueError: bump 1 is broken"
    assert list(out["agent_tool_errors"]) == [0, 0, 6]
    scores = environment_reward(["go"] * 3, list(out["response_text"]), records)
    assert scores == [1.0, 1.0, 6.0]


def test_only_the_rows_environment_tools_are_offered() -> None:
    rollout = rollout_for(
        TOK, always(call("add")), environment=COUNTER, renderer="plain", max_turns=1,
    )  # fmt: skip
    out = generate_rollout(rollout, batch([{}]))
    [result] = [r for s in out["agent_trajectory"][0]["segments"] for r in s["tool_results"]]
    assert result["error"] == "unknown_tool"
    assert result["content"] == "Error: unknown tool 'add'; available: ['bump']"


def test_a_row_without_its_environment_column_is_one_line() -> None:
    rollout = rollout_for(TOK, always(call()), environment_column="env", renderer="plain")
    with pytest.raises(HfsdkError) as info:
        generate_rollout(rollout, batch([{"env": COUNTER}, {"env": None}]))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("row 1 has no environment name in column 'env' (got None)")


def test_a_non_finite_reward_is_one_line_naming_the_environment() -> None:
    rollout = rollout_for(TOK, always(call()), environment_column="env", renderer="plain")
    with pytest.raises(HfsdkError, match=r"environment '.*Unscored': reward\(\) returned nan;"):
        generate_rollout(rollout, batch([{"env": f"{counter_env.__name__}:Unscored"}]))


@pytest.mark.parametrize(("score", "shown"), [("1.0", r"'1\.0' \(str\)"),
                                              (True, r"(np\.)?True_? \(bool_?\)"),
                                              (None, r"None \(NoneType\)")])  # fmt: skip
def test_a_reward_that_is_no_number_is_one_line_naming_its_type(score: Any, shown: str) -> None:
    # float() took "1.0" and True as rewards, and reported None as a TypeError raised.
    rollout = rollout_for(TOK, always(call()), environment_column="env", renderer="plain")
    row = {"env": f"{counter_env.__name__}:Miscored", "score": score}
    with pytest.raises(HfsdkError, match=rf"Miscored': reward\(\) returned {shown};"):
        generate_rollout(rollout, batch([row]))


def test_a_close_that_raises_is_one_line_naming_the_environment() -> None:
    rollout = rollout_for(TOK, always(call()), environment_column="env", renderer="plain")
    with pytest.raises(HfsdkError, match=r"'.*Unclosable': close\(\) raised RuntimeError: close"):
        generate_rollout(rollout, batch([{"env": f"{counter_env.__name__}:Unclosable"}]))


def test_a_constructor_that_raises_is_one_line_naming_the_environment() -> None:
    rollout = rollout_for(TOK, always(call()), environment_column="env", renderer="plain")
    with pytest.raises(HfsdkError, match=r"'.*Unbuildable': creating it raised RuntimeError: no"):
        generate_rollout(rollout, batch([{"env": f"{counter_env.__name__}:Unbuildable"}]))


def test_an_unknown_environment_name_is_one_line_listing_the_registered() -> None:
    rollout = rollout_for(TOK, always(call()), environment_column="env", renderer="plain")
    with pytest.raises(HfsdkError) as info:
        generate_rollout(rollout, batch([{"env": "frozen_lak"}]))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("unknown environment 'frozen_lak'; available: frozen_lake")
    assert "did you mean 'frozen_lake'?" in message


def test_the_trajectory_json_carries_the_environment_and_its_reward() -> None:
    rollout = rollout_for(TOK, always(call(by=2)), environment=COUNTER, renderer="plain")
    out = generate_rollout(rollout, batch([{"target": 2}]))
    extra = json.loads(json.dumps(out["agent_trajectory"][0]))["extra"]
    assert extra == {"environment": COUNTER, "environment_reward": 1.0}


def test_an_episode_whose_template_drops_thinking_trains_as_segments() -> None:
    from hfsdk_datasets import prepare_row

    from ..template_conversation import FAMILIES, PROMPT, SCHEMAS, model_turns

    family = FAMILIES["qwen3"]
    tok = family["tokenizer"]()
    turns = model_turns(family)
    marker = tok.encode("</tool_response>", add_special_tokens=False)

    def script(context: list[int]) -> list[int]:
        done = sum(
            context[i : i + len(marker)] == marker for i in range(len(context) - len(marker) + 1)
        )
        return [*tok.encode(turns[done], add_special_tokens=False), tok.eos_token_id]

    rollout = rollout_for(
        tok, script, width=64, environment=f"{counter_env.__name__}:Adder",
        renderer="chat_template", parser="hermes", max_response_tokens=400, max_turns=4,
    )  # fmt: skip
    prepared = prepare_row({"prompt": PROMPT}, 0, "prompt", tok, True, SCHEMAS)
    ids_t = torch.tensor([prepared.token_ids])
    prompts = Batch.from_dict(
        tensors={"input_ids": ids_t, "attention_mask": torch.ones_like(ids_t)},
        non_tensors={k: [v] for k, v in prepared.row.items()},
        meta={"n": 1},
    )
    out = generate_rollout(rollout, prompts)
    # each turn that thought ends its segment (the template drops the thinking later)
    assert list(out["segment_index"]) == [0, 1, 2]
    records = list(out["agent_trajectory"])
    assert [r["finish"] for r in records] == ["segment", "segment", "stop"]
    # the environment's reward lands on the last segment, the one that is scored
    assert environment_reward([""], [out["response_text"][2]], records[2:]) == [2.0]
    assert all(r["extra"]["environment"].endswith(":Adder") for r in records)


@pytest.mark.parametrize("family_name", ["qwen2.5", "llama3"])
def test_a_first_observation_under_a_chat_template_keeps_the_episode_one_row(
    family_name: str,
) -> None:
    from hfsdk_datasets import prepare_row

    from ..template_conversation import FAMILIES, PROMPT, SCHEMAS, model_turns

    family = FAMILIES[family_name]
    tok = family["tokenizer"]()
    turns = model_turns(family)
    requests: list[list[int]] = []

    def script(context: list[int]) -> list[int]:
        requests.append(list(context))
        return [*tok.encode(turns[len(requests) - 1], add_special_tokens=False), tok.eos_token_id]

    rollout = rollout_for(
        tok, script, width=64, environment=f"{counter_env.__name__}:AdderObserved",
        renderer="chat_template", parser=family["parser"], max_response_tokens=400, max_turns=4,
    )  # fmt: skip
    prepared = prepare_row({"prompt": PROMPT}, 0, "prompt", tok, True, SCHEMAS)
    ids_t = torch.tensor([prepared.token_ids])
    prompts = Batch.from_dict(
        tensors={"input_ids": ids_t, "attention_mask": torch.ones_like(ids_t)},
        non_tensors={k: [v] for k, v in prepared.row.items()},
        meta={"n": 1},
    )
    out = generate_rollout(rollout, prompts)
    # The first request is what a fresh request renders for the prompt and the observation
    # (no empty assistant turn), so the re-rendering at each turn boundary matches: one row.
    observed = [*PROMPT, {"role": "user", "content": "You may add numbers."}]
    fresh = tok.apply_chat_template(observed, tools=SCHEMAS, add_generation_prompt=True)
    fresh = fresh["input_ids"] if isinstance(fresh, Mapping) else fresh  # transformers 5
    assert requests[0] == list(fresh)
    assert list(out["segment_index"]) == [0]
    assert out["agent_trajectory"][0]["finish"] == "stop"
    # The observation opens the row as context; only the model's tokens are trained on.
    mask = out["response_mask"][0].bool()
    trained = tok.decode(out["responses"][0][mask].tolist(), skip_special_tokens=True)
    assert trained == "".join(tok.decode(tok.encode(t, add_special_tokens=False)) for t in turns)
    context = tok.decode(out["input_ids"][0][out["attention_mask"][0].bool()].tolist())
    assert "You may add numbers." in context


def test_each_trajectory_gets_its_own_copy_of_the_row() -> None:
    # Marker appends to the row's list: n=4 samples of one prompt sharing it (and the
    # batch's own list) scored 2, 3, 4, 5 and left the batch's column changed.
    rollout = rollout_for(
        TOK, always(call()), environment=f"{counter_env.__name__}:Marker", renderer="plain",
        max_turns=3, max_response_tokens=200,
    )  # fmt: skip
    cells = [0]
    prompt = torch.tensor([TOK.encode("go")])
    prompts = Batch.from_dict(
        tensors={"input_ids": prompt, "attention_mask": torch.ones_like(prompt)},
        non_tensors={"raw_prompt": ["go"], "uid": [0], "cells": [cells]},
        meta={"n": 4},
    )
    out = generate_rollout(rollout, prompts)
    assert [t["extra"]["environment_reward"] for t in out["agent_trajectory"]] == [2.0] * 4
    assert cells == [0] and list(prompts["cells"][0]) == [0]


def test_a_done_that_is_no_bool_is_one_line_naming_the_environment() -> None:
    rollout = rollout_for(
        TOK, always(call()), environment=f"{counter_env.__name__}:Undecided", renderer="plain",
        max_turns=6, max_response_tokens=200,
    )  # fmt: skip
    with pytest.raises(HfsdkError) as info:
        generate_rollout(rollout, batch([{"target": 3}]))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"environment '{counter_env.__name__}:Undecided': done is a ")
    assert "expected True or False" in message


def test_done_takes_none_bools_zero_one_and_zero_dim_arrays() -> None:
    # Only a bool was taken: None, 0/1 and a 0-dim tensor / numpy bool (a gym-style env's
    # ``done``) stopped a run that had worked.
    import types

    import numpy as np

    from hfsdk_agents.environments.loop import is_done

    def done(value: object) -> bool:
        return is_done(types.SimpleNamespace(done=value), "env")

    assert done(True) and done(1) and done(np.bool_(True)) and done(torch.tensor(True))
    assert done(np.array(1)) and done(torch.tensor(1)) and done(np.int64(1))
    for value in (None, False, 0, np.bool_(False), torch.tensor(False), np.array(False)):
        assert not done(value), value
    assert not is_done(types.SimpleNamespace(), "env")  # none at all
    for value in (2, -1, 0.5, "yes", [True], torch.tensor([True]), np.array([1]), print):
        with pytest.raises(HfsdkError, match=r"^environment 'env': done is a "):
            done(value)
