"""llm_judge kwargs that do not fit together are one line when the reward section loads."""

from __future__ import annotations

import pytest

from hfsdk import HfsdkError
from hfsdk_rewards.composition import load_reward_functions


def test_the_refusal_is_one_line_when_the_reward_section_is_loaded() -> None:
    functions = [{"name": "llm_judge", "kwargs": {"min_score": 5, "max_score": 1}}]
    with pytest.raises(HfsdkError, match=r"max_score=1.0 is below min_score=5.0") as caught:
        load_reward_functions(functions)
    assert "\n" not in str(caught.value)
