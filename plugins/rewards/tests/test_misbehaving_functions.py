"""Reward functions that misbehave: each is one line naming it, and none changes another's input."""

from __future__ import annotations

import sys
import time
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


def consumes(prompts: list[str], responses: list[str], extra_info: list[dict]) -> list[float]:
    for info in extra_info:
        info.pop("answer")  # a verl-style helper that consumes a field
    return [0.0] * len(responses)


def has_answer(prompts: list[str], responses: list[str], extra_info: list[dict]) -> list[float]:
    return [float("answer" in info) for info in extra_info]


def test_a_function_that_edits_a_row_inside_a_column_changes_nothing_for_the_next() -> None:
    # Only the lists were copied: the dicts inside them were shared, so a function that
    # popped a key took it from the next function and from the caller.
    columns = {"extra_info": [{"answer": "a"}, {"answer": "b"}, {"answer": "c"}]}
    assert _score("consumes", "has_answer", columns=columns) == [1.0, 1.0, 1.0]
    assert columns == {"extra_info": [{"answer": "a"}, {"answer": "b"}, {"answer": "c"}]}


class _Counted:
    """A row that counts how often it is copied."""

    copies = 0

    def __init__(self) -> None:
        self.nested = {"turns": [1, 2]}

    def __copy__(self) -> _Counted:
        type(self).copies += 1
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Counted:
        type(self).copies += 1
        return self


def test_only_the_columns_a_function_takes_are_copied_and_only_row_deep() -> None:
    # Every column was deep-copied for every function, inside its deadline: 2048 agent
    # trajectories took a second per function, even one that reads only the answer.
    _Counted.copies = 0
    columns = {"answer": ["a", "b", "c"], "agent_trajectory": [_Counted() for _ in range(3)]}
    assert _score("matches", columns=columns) == [1.0, 1.0, 1.0]
    assert _Counted.copies == 0
    # A row's own keys are private to the function; objects nested inside it are shared.
    seen: list[Any] = []

    def edits(prompts: list[str], responses: list[str], extra_info: list[dict]) -> list[float]:
        seen.extend(extra_info)
        for info in extra_info:
            info.pop("answer")
        return [0.0] * len(responses)

    from hfsdk_rewards.calling import RewardCall, call_reward_functions

    rows = [{"answer": "a", "nested": {"k": 1}}]
    call_reward_functions([RewardCall(label="edits", fn=edits)], ["p"], ["a"], {"extra_info": rows})
    assert rows == [{"answer": "a", "nested": {"k": 1}}]
    assert seen[0] is not rows[0] and seen[0]["nested"] is rows[0]["nested"]
    # A numpy column of dicts is copied row by row too, and stays a numpy array.
    import numpy as np

    array = np.array([None], dtype=object)
    array[0] = {"answer": "a"}
    seen.clear()
    call_reward_functions(
        [RewardCall(label="edits", fn=edits)], ["p"], ["a"], {"extra_info": array}
    )
    assert array[0] == {"answer": "a"} and isinstance(seen[0], dict)


def hangs_alone(prompts: list[str], responses: list[str], **_: Any) -> list[float]:
    if len(responses) > 1:
        raise ValueError("only batches fail")
    time.sleep(3600)
    return [0.0]


def test_finding_the_failing_sample_keeps_the_deadline() -> None:
    spec = {"functions": [{"name": f"{__name__}:hangs_alone"}], "timeout_s": 1}
    start = time.perf_counter()
    with pytest.raises(HfsdkError, match=r"then did not return within 1 s \(reward.timeout_s\)"):
        compute_rewards(["p", "q"], ["a", "b"], {}, spec)
    assert time.perf_counter() - start < 10


def test_reward_score_stops_a_hung_function_in_one_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from hfsdk.core.cli.main import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"response": "a"}\n')
    with pytest.raises(SystemExit) as info:
        main(
            ["reward", "score", f"{__name__}:hangs_alone", "--data", str(rows), "--timeout-s", "1"]
        )
    assert info.value.code == 2
    assert "did not return within 1 s (--timeout-s)" in capsys.readouterr().err
