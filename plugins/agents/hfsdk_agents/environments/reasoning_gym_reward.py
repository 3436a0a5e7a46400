"""The ``reasoning_gym`` reward: the row's reasoning-gym task scores the response itself.

The answer is what the response holds between ``<answer>`` and ``</answer>``
(reasoning-gym's own ``extract_answer``, the format its prompts ask for); the
score is the task's ``score_answer(answer, entry)`` on the row's entry, rebuilt
from the columns :mod:`~hfsdk_agents.environments.reasoning_gym_data` wrote (or the
entry it wrote, ``rg_entry``, where this process rebuilds another question).
A verifier that raises on an answer (several do on malformed ones: ``prime_factorization``
on ``2 x 3``, ``game_of_life`` on ``{}``) scores it 0.0, a wrong answer, with a warning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

REWARD_FUNCTION_NAME = "reasoning_gym"
"""Registry name of :func:`reasoning_gym_reward`."""

COLUMNS = ("rg_task", "rg_seed", "rg_size", "rg_index", "rg_config")

logger = logging.getLogger(__name__)

_WARNED: set[tuple[str, str]] = set()
"""(task, exception type) pairs already warned about: one line each, not one per sample."""


def columns_read(config: Any = None) -> tuple[str, ...]:
    """The dataset columns the reward reads (a run without them is refused before it starts)."""
    return COLUMNS


def score_response(
    response: str,
    task: str,
    seed: int,
    size: int,
    index: int,
    config: str,
    entry_json: str | None = None,
) -> float:
    """reasoning-gym's score of ``response`` for entry ``index`` of the task's dataset.

    Some tasks' entries depend on Python's hash seed (``polynomial_multiplication``), so this
    process may rebuild another question than the one written: then the written entry
    (``rg_entry``) is scored. Otherwise the rebuilt one (its exact types: JSON turns
    ``arc_agi``'s tuples into lists, which its verifier scores lower).
    """
    from hfsdk_agents.environments.extras import require
    from hfsdk_agents.environments.reasoning_gym_data import reasoning_gym_dataset

    # require(), not a bare import: without the extra this is the install hint.
    extract_answer = require("reasoning_gym.utils").extract_answer

    dataset = reasoning_gym_dataset(task, seed=seed, size=size, config=json.loads(config))
    entry = dataset[int(index)]
    written = json.loads(entry_json) if entry_json else None
    if written is not None and written.get("question") != entry.get("question"):
        entry = written
    answer = extract_answer(response)
    try:
        return float(dataset.score_answer(answer, entry))
    except Exception as err:  # not BaseException: a KeyboardInterrupt still stops the run
        # The verifier chokes on an answer it cannot parse: the model answered wrong, and one
        # odd sampled response must not stop a run.
        if (task, type(err).__name__) not in _WARNED:
            _WARNED.add((task, type(err).__name__))
            logger.warning(
                "reasoning_gym task %r: its verifier raised %s: %s on the answer %r; scored "
                "0.0 (a wrong answer); further %s errors of this task are not logged",
                task,
                type(err).__name__,
                str(err)[:200],
                str(answer)[:200],
                type(err).__name__,
            )
        return 0.0


def reasoning_gym_reward(
    prompts: list[str],
    responses: list[str],
    rg_task: Sequence[str],
    rg_seed: Sequence[int],
    rg_size: Sequence[int],
    rg_index: Sequence[int],
    rg_config: Sequence[str],
    **columns: Any,
) -> list[float]:
    """Each response scored by its row's reasoning-gym verifier (``rg_entry``, the entry as
    written, is optional: rows written before it was added rebuild theirs)."""
    entries = columns.get("rg_entry") or [None] * len(responses)
    return [
        score_response(r, t, int(s), int(n), int(i), c, e)
        for r, t, s, n, i, c, e in zip(
            responses, rg_task, rg_seed, rg_size, rg_index, rg_config, entries, strict=True
        )
    ]
