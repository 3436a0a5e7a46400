"""Review fixes in the environments: held-out reasoning-gym validation rows, and ``done``
ending the episode after the call that set it (not after the turn)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hfsdk import Batch, generate_rollout
from hfsdk_testing.chat_templates import llama3_tokenizer

from ..fakes import rollout_for
from . import counter_env

CONFIG = {"max_terms": 2, "max_digits": 2}
REWARD_COLUMNS = ("rg_task", "rg_seed", "rg_size", "rg_index", "rg_config", "rg_entry")


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_validation_rows_are_not_training_rows_and_the_verifier_still_scores_them(
    tmp_path: Path,
) -> None:
    pytest.importorskip("reasoning_gym")
    from hfsdk_agents.environments.reasoning_gym_data import write_reasoning_gym_data
    from hfsdk_agents.environments.reasoning_gym_reward import reasoning_gym_reward

    train_path, val_path = write_reasoning_gym_data(
        "basic_arithmetic", tmp_path, train_size=50, val_size=10, seed=0, config=CONFIG
    )
    train, val = _read(train_path), _read(val_path)
    assert len(train) == 50 and len(val) == 10
    # Before: validation came from seed + 1, whose entry i is training entry i + 1.
    assert not {r["prompt"] for r in val} & {r["prompt"] for r in train}
    # reasoning-gym builds entry idx of seed s from Random(s + idx): that is an item's identity.
    items = {r["rg_seed"] + r["rg_index"] for r in train}
    assert not {r["rg_seed"] + r["rg_index"] for r in val} & items
    right = reasoning_gym_reward(
        [r["prompt"] for r in val],
        [f"<answer>{r['answer']}</answer>" for r in val],
        **{column: [r[column] for r in val] for column in REWARD_COLUMNS},
    )
    assert right == [1.0] * 10
    # Rebuilt from (rg_seed, rg_size, rg_index) alone, without the written entry.
    rebuilt = reasoning_gym_reward(
        [val[0]["prompt"]],
        [f"<answer>{val[0]['answer']}</answer>"],
        **{column: [val[0][column]] for column in REWARD_COLUMNS[:-1]},
    )
    assert rebuilt == [1.0]


def test_the_built_in_task_cache_key_changed_with_its_validation_rows() -> None:
    from hfsdk_agents.environments.reasoning_gym_build import BUILDER_VERSION

    # Builds cached under version 1 hold validation rows that repeat training rows.
    assert BUILDER_VERSION >= 2


def test_calls_after_the_one_that_set_done_do_not_run() -> None:
    """Counter with target 2, one turn ``bump(2)`` then ``bump(1)``: the second call is
    answered with an error and the count stays 2 (before: it ran, count 3, reward 0.0)."""
    tok = llama3_tokenizer()
    calls = '<function=bump>{"by": 2}</function><function=bump>{"by": 1}</function>'
    turn = [*tok.encode(calls, add_special_tokens=False), tok.eos_token_id]
    rollout = rollout_for(
        tok,
        lambda ctx: turn,
        width=64,
        environment=f"{counter_env.__name__}:Counter",
        renderer="plain",
        parser="llama_function",
        max_turns=3,
        max_response_tokens=200,
    )
    ids = torch.tensor([tok.encode("go", add_special_tokens=False)])
    batch = Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        non_tensors={"raw_prompt": ["go"], "uid": [0], "target": [2]},
        meta={"n": 1},
    )
    counter_env.CLOSED.clear()
    trajectory = generate_rollout(rollout, batch)["agent_trajectory"][0]
    results = [r for s in trajectory["segments"] for r in s["tool_results"]]
    assert [r["content"] for r in results] == [
        "count 2",
        "Error: the episode has ended; this call did not run",
    ]
    assert [r["ok"] for r in results] == [True, False]
    assert results[1]["error"] == "episode_ended"
    assert trajectory["finish"] == "done"
    assert counter_env.CLOSED == ["counter:2"]
    assert trajectory["extra"]["environment_reward"] == 1.0
