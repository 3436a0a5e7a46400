"""The ``frozen_lake`` task: rows, the call format and the run settings (no torch here).

Every row is the same episode (the fixed map): prompt ``frozen lake :``, column
``environment: frozen_lake``. The model walks with hermes calls spaced so that
each JSON piece is one word of the word-level tokenizer::

    <tool_call> {"name": "move", "arguments": {"direction": "down"}} </tool_call>

Its reward is the environment's (``environment``: 1.0 when it reached the goal),
so the reward mean is the success rate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hfsdk_agents.environments.frozen_lake import ACTIONS, AGENT, LAKE_MAP, STATUS

ENVIRONMENT_NAME = "frozen_lake"
PROMPT = "frozen lake :"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
MAX_MOVES = 6


def call_text(direction: str) -> str:
    """A well-formed ``move`` call in the task's spacing."""
    return (
        f'{CALL_OPEN} {{"name": "move", "arguments": {{"direction": "{direction}"}}}} {CALL_CLOSE}'
    )


def call_words(direction: str) -> list[str]:
    """The call's words (tokens)."""
    return call_text(direction).split()


def corpus() -> list[str]:
    """Every word the task uses: prompt, calls, responses, every board row with the agent."""
    rows = [line[:c] + AGENT + line[c + 1 :] for line in LAKE_MAP for c in range(len(line))]
    return [
        PROMPT,
        *(call_text(d) for d in ACTIONS),
        " ".join([RESPONSE_OPEN, *LAKE_MAP, *rows, *STATUS, RESPONSE_CLOSE]),
    ]


def task_rows(count: int) -> list[dict[str, str]]:
    """``count`` copies of the episode's row (prompt and environment column)."""
    return [{"prompt": PROMPT, "environment": ENVIRONMENT_NAME} for _ in range(count)]


def frozen_lake_preset(root: Path) -> dict[str, Any]:
    """What ``--task frozen_lake`` puts under the user's config."""
    return {
        "data": {
            "train_files": [str(root / "train.jsonl")],
            "val_files": [str(root / "val.jsonl")],
            "batch_size": 8,
            "max_prompt_length": 8,
        },
        "algorithm": {"n_samples_per_prompt": 8},
        "trainer": {"total_steps": 20},
        "actor": {
            "model_path": str(root / "model"),
            "optim": {"lr": 1e-3},
            "mini_batch_size": 64,
            "micro_batch_size": 64,
        },
        "reference": {"forward_micro_batch_size": 64},
        "reward": {"functions": [{"name": "environment"}]},
        "rollout": {
            "max_response_length": 16,
            "multi_turn": {
                "environment_column": "environment",
                "parser": "hermes",
                "renderer": "plain",
                "max_turns": MAX_MOVES,
                "max_response_tokens": 96,
            },
        },
    }
