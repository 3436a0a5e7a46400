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


def test_template_columns_are_checked_before_the_run() -> None:
    # The template's fields other than prompt and response are dataset columns; a dataset
    # without one failed only at the first batch.
    from hfsdk_rewards.scorer import FunctionScorer

    template = "Q {prompt} A {response} Ref {reference} {reference} {meta[level]}"
    functions = [{"name": "llm_judge", "kwargs": {"template": template}}]
    [loaded] = load_reward_functions(functions)
    assert loaded.call.needs == ("reference", "meta")
    problem = FunctionScorer("reward", {"functions": functions}).signature_problem(
        ["prompt", "answer"]
    )
    assert problem is not None
    assert "'llm_judge' reads the dataset column 'reference', which the dataset lacks" in problem


@pytest.mark.parametrize(
    ("template", "detail"),
    [
        ("Q: {prompt} A: {response} }", "Single '}'"),
        ("Q: {prompt", "expected '}'"),
        ("{prompt!x}", "conversion"),
        ('Q: {prompt} Reply as {"score": N}', '"score"'),
        ("Q: {} {response}", "{}"),
    ],
)
def test_a_template_that_cannot_be_filled_is_refused_when_the_section_loads(
    template: str, detail: str
) -> None:
    functions = [{"name": "llm_judge", "kwargs": {"template": template}}]
    with pytest.raises(HfsdkError) as caught:
        load_reward_functions(functions)
    line = str(caught.value)
    assert "\n" not in line
    assert "template=" in line and detail in line, line
    assert "write {{ and }} for literal braces" in line, line


def test_a_template_with_literal_braces_doubled_loads() -> None:
    template = 'Q: {prompt} A: {response} Reply as {{"score": N}}'
    [loaded] = load_reward_functions([{"name": "llm_judge", "kwargs": {"template": template}}])
    assert loaded.call.needs == ()
