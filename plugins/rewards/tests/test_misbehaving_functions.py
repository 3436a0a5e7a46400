"""Reward functions that misbehave: each is one line naming it, and none changes another's input."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk_rewards import compute_rewards


def exits(prompts: list[str], responses: list[str], **_: Any) -> list[float]:
    sys.exit(0)


async def exits_async(prompts: list[str], responses: list[str], **_: Any) -> list[float]:
    sys.exit(3)


def bools(prompts: list[str], responses: list[str], **_: Any) -> list[bool]:
    return [True] * len(responses)


def huge(prompts: list[str], responses: list[str], **_: Any) -> list[int]:
    return [10**400] * len(responses)


def reverses(prompts: list[str], responses: list[str], answer: list[str]) -> list[float]:
    answer.reverse()
    return [0.0] * len(responses)


def matches(prompts: list[str], responses: list[str], answer: list[str]) -> list[float]:
    return [float(a == r) for a, r in zip(answer, responses, strict=True)]


def _score(*names: str, columns: dict[str, list[Any]] | None = None) -> list[float]:
    spec = {"functions": [{"name": f"{__name__}:{name}"} for name in names]}
    scores, _ = compute_rewards(["p", "q", "r"], ["a", "b", "c"], columns or {}, spec)
    return scores


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("exits", "called sys.exit(0); return a score per sample instead"),
        ("exits_async", "called sys.exit(3)"),
        ("bools", "returned True (bool) as the score of sample 0"),
        ("huge", "returned the non-finite score inf for sample 0"),
    ],
)
def test_a_function_that_exits_or_returns_no_score_is_one_line(name: str, says: str) -> None:
    with pytest.raises(HfsdkError) as info:  # not SystemExit: the run would end quietly
        _score(name)
    assert f"'{__name__}:{name}'" in str(info.value) and says in str(info.value)


def test_a_function_that_edits_a_column_changes_nothing_for_the_next() -> None:
    columns = {"answer": ["a", "b", "c"]}
    assert _score("reverses", "matches", columns=columns) == [1.0, 1.0, 1.0]
    assert columns == {"answer": ["a", "b", "c"]}
