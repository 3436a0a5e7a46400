"""The ``tool_use`` task: prompts, the ``add`` tool, the call format and the reward.

Pure Python (no torch). Prompt ``"17 + 25 ="``; the tiny model cannot add two-digit
numbers in its head (its warm start guesses), but it can call the calculator:

``<tool_call> {"name": "add", "arguments": {"a": 17 , "b": 25 }} </tool_call>``
→ `` <tool_response> 42 </tool_response>`` → ``42 </s>``.

Every word is one token of the task's word-level tokenizer (the JSON is spaced so
that numbers are the same tokens as in the prompt). Reward: 1.0 when the first
number after the last tool response (or in the response, without one) is the sum.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

REWARD_FUNCTION_NAME = "tool_use"
"""Registry name of :func:`tool_use_reward`."""
MAX_OPERAND = 29
CALL_WORDS = ('{"name":', '"add",', '"arguments":', '{"a":', ",", '"b":', "}}")
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"

# ASCII digits with an optional decimal part (the prompts' operands; answers: first_number).
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?", re.ASCII)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return int(a) + int(b)


def format_prompt(a: int, b: int) -> str:
    """The prompt of ``a + b``."""
    return f"{a} + {b} ="


def call_text(a: int, b: int) -> str:
    """A well-formed call of ``add(a, b)`` in the task's spacing."""
    return f'{CALL_OPEN} {{"name": "add", "arguments": {{"a": {a} , "b": {b} }}}} {CALL_CLOSE}'


def task_rows(max_operand: int = MAX_OPERAND, seed: int = 0) -> list[dict[str, str]]:
    """Every prompt once, shuffled with ``seed``; columns ``prompt`` and ``answer``."""
    rows = [
        {"prompt": format_prompt(a, b), "answer": str(a + b)}
        for a in range(max_operand + 1)
        for b in range(max_operand + 1)
    ]
    random.Random(seed).shuffle(rows)
    return rows


def final_answer(response: str) -> int | None:
    """The first number after the last tool response (or in the whole text), else ``None``
    (also when that number is not whole, ``"42.9"``)."""
    tail = response.rsplit(RESPONSE_CLOSE, 1)[-1]
    if CALL_OPEN in tail:
        return None  # a call that never got a response is not an answer (its arguments either)
    from hfsdk_tasks import first_number  # the default task's reading of an answer

    return first_number(tail)


def tool_use_reward(
    prompts: list[str], responses: list[str], answer: Sequence[Any] | None = None, **columns: Any
) -> list[float]:
    """1.0 where :func:`final_answer` equals the ``answer`` column (or the prompt's sum)."""
    if answer is None:
        answer = [sum(int(x) for x in _NUMBER.findall(p)[:2]) for p in prompts]
    return [
        1.0 if final_answer(r) == int(str(t).strip()) else 0.0
        for r, t in zip(responses, answer, strict=True)
    ]
