"""The built-in task: single-digit addition, its prompts, reward and cost.

Pure Python (no torch), so the driver can import the reward functions cheaply.

- Prompt: ``"3 + 5 ="``; dataset columns ``prompt`` and ``answer`` (``"8"``).
- Reward: 1.0 when the first number in the response equals the answer, else 0.0.
- Cost (Safe-RLHF): 1.0 when the response contains the filler word (``ugh``),
  else 0.0 — a stand-in for an unwanted behaviour the warm-started policy has.
"""

from __future__ import annotations

import contextlib
import numbers
import random
import re
from collections.abc import Sequence
from typing import Any

from hfsdk import HfsdkError
from hfsdk_tasks.spec import DefaultTaskSpec

REWARD_FUNCTION_NAME = "default_task"
"""Suggested registry name of :func:`default_task_reward`."""
COST_FUNCTION_NAME = "default_task_cost"
"""Suggested registry name of :func:`default_task_cost`."""

DEFAULT_FILLER_WORD = DefaultTaskSpec().filler_word

# ASCII digits with an optional decimal part: "8.5" is one number (not 8), and "٨" none.
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?", re.ASCII)
_PROMPT = re.compile(r"^\s*(\d+)\s*\+\s*(\d+)\s*=\s*$")


def format_prompt(a: int, b: int) -> str:
    """The prompt text for ``a + b``."""
    return f"{a} + {b} ="


def parse_prompt(prompt: str) -> tuple[int, int]:
    """The two operands of a prompt made by :func:`format_prompt`."""
    match = _PROMPT.match(prompt)
    if match is None:
        raise HfsdkError(
            f"prompt {prompt!r} is not a default-task prompt; expected the form 'A + B =' "
            "(or pass the 'answer' column to the reward function)"
        )
    return int(match.group(1)), int(match.group(2))


def task_rows(spec: DefaultTaskSpec) -> list[dict[str, str]]:
    """Every prompt of the task once, shuffled with the spec's seed (the training split)."""
    rows = [
        {"prompt": format_prompt(a, b), "answer": str(a + b)}
        for a in range(spec.max_operand + 1)
        for b in range(spec.max_operand + 1)
    ]
    random.Random(spec.seed).shuffle(rows)
    return rows


def validation_rows(spec: DefaultTaskSpec) -> list[dict[str, str]]:
    """A fixed sample of the task's prompts.

    The task is a fixed table, so there is no held-out part: validation measures
    how well the policy answers (greedily) prompts it was trained on.
    """
    rows = task_rows(spec)
    random.Random(spec.seed + 1).shuffle(rows)
    return rows[: min(spec.val_size, len(rows))]


def first_number(text: str) -> int | None:
    """The first number in ``text`` when it is whole (``"8"``, ``"8.0"``), else ``None``
    (no number, or a first number such as ``"8.5"`` that no integer answer equals)."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    whole, _, fraction = match.group().partition(".")
    return None if fraction.strip("0") else int(whole)


def _answers(prompts: Sequence[str], answer: Sequence[Any] | None) -> list[int]:
    if answer is None:
        return [sum(parse_prompt(p)) for p in prompts]
    if len(answer) != len(prompts):
        raise HfsdkError(
            f"the 'answer' column has {len(answer)} entries but there are {len(prompts)} "
            "prompts; pass one answer per sample"
        )
    targets = []
    for index, value in enumerate(answer):
        target = _whole_number(value)
        if target is None:
            raise HfsdkError(
                "the 'answer' column must hold integers (as numbers such as 8 or 8.0, or "
                f"strings such as '8'); entry {index} is {value!r}, which is not a whole "
                "number; correct or drop that row"
            )
        targets.append(target)
    return targets


def _whole_number(value: Any) -> int | None:
    """``value`` as an int when it is a whole number (``8``, ``8.0``, ``"8"``, ``"8.0"``:
    pandas turns an integer column with a missing value into floats, and
    :func:`first_number` reads ``"8.0"`` as 8 too), else ``None``."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return int(number) if number.is_integer() else None  # NaN and inf are not integers
    text = str(value).strip()
    with contextlib.suppress(ValueError):
        return int(text)
    if _NUMBER.fullmatch(text) is None:
        return None
    whole, _, fraction = text.partition(".")
    return None if fraction.strip("0") else int(whole)


def default_task_reward(
    prompts: list[str],
    responses: list[str],
    answer: Sequence[Any] | None = None,
    **columns: Any,
) -> list[float]:
    """1.0 where the response's first number equals the answer, else 0.0.

    ``answer`` is the dataset column; without it the answer is computed from
    the prompt (``"a + b ="``). Other columns are ignored.
    """
    if len(responses) != len(prompts):
        raise HfsdkError(
            f"got {len(prompts)} prompts but {len(responses)} responses; "
            "pass one response per prompt"
        )
    targets = _answers(prompts, answer)
    return [1.0 if first_number(r) == t else 0.0 for r, t in zip(responses, targets, strict=True)]


def default_task_cost(
    prompts: list[str],
    responses: list[str],
    filler_word: str = DEFAULT_FILLER_WORD,
    **columns: Any,
) -> list[float]:
    """1.0 where the response contains ``filler_word`` as a word, else 0.0."""
    if len(responses) != len(prompts):
        raise HfsdkError(
            f"got {len(prompts)} prompts but {len(responses)} responses; "
            "pass one response per prompt"
        )
    return [1.0 if filler_word in r.split() else 0.0 for r in responses]
