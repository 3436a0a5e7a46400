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


def test_template_fields_the_rollout_adds_are_no_dataset_columns() -> None:
    # Every reward function receives the agent loop's columns (docs/agents.md); requiring
    # them of the dataset refused every agent run whose judge read its tool calls.
    from hfsdk_rewards.scorer import FunctionScorer

    template = (
        "Q: {prompt}\nA: {response}\nTools: {agent_tool_calls} ({agent_tool_errors} failed) "
        "in {agent_turns} turns: {agent_trajectory} {response_text} {reference}"
    )
    functions = [{"name": "llm_judge", "kwargs": {"template": template}}]
    [loaded] = load_reward_functions(functions)
    assert loaded.call.needs == ("reference",)
    scorer = FunctionScorer("reward", {"functions": functions})
    assert scorer.signature_problem(["prompt", "answer", "reference"]) is None


def test_a_field_name_with_a_space_is_a_column() -> None:
    # str.format fills {ground truth} from a column named "ground truth".
    template = "{prompt} {response} {ground truth}"
    [loaded] = load_reward_functions([{"name": "llm_judge", "kwargs": {"template": template}}])
    assert loaded.call.needs == ("ground truth",)


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
