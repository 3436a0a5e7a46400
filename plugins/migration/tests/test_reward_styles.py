"""verl-, TRL- and OpenRLHF-style reward functions: recognition, calling, results and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_migration.reward_styles import detect_style
from hfsdk_rewards import RewardFunctionError, compute_rewards, load_reward_functions

SOURCE = """
import torch

CALLS = []


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    CALLS.append((data_source, solution_str, ground_truth, extra_info))
    return {"score": float(solution_str == ground_truth), "pred": solution_str, "len": 1.5}


def verl_with_kwargs(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0):
    return float(solution_str == ground_truth) + bonus


def verl_bad(data_source, solution_str, ground_truth, extra_info=None):
    if solution_str == "boom":
        raise ValueError("cannot parse")
    return "high"


def trl_fn(prompts, completions, ground_truth, **kwargs):
    CALLS.append((prompts, completions, sorted(kwargs)))
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [None if g is None else float(t == g) for t, g in zip(texts, ground_truth)]


def trl_short(prompts, completions, **kwargs):
    return [1.0]


def trl_bonus(prompts, completions, ground_truth, bonus=0.0):
    return [bonus] * len(completions)


def reward_func(queries, prompts, labels):
    CALLS.append((queries, prompts, labels))
    return torch.tensor([float(q.endswith(str(l))) for q, l in zip(queries, labels)])


def reward_func_bonus(queries, prompts, labels, bonus=0.0):
    return torch.tensor([bonus] * len(queries))


def reward_func_dict(queries, prompts, labels):
    rewards = torch.tensor([2.0] * len(queries))
    return {"rewards": rewards, "scores": rewards, "extra_logs": {"acc": torch.tensor([1.0] * len(queries))}}


def native(prompts, responses, **columns):
    CALLS.append(sorted(columns))
    return [0.5] * len(responses)


def plain(a, b):
    return [0.0] * len(a)
"""

MESSAGES = [[{"role": "user", "content": "2 + 3 ="}], [{"role": "user", "content": "1 + 1 ="}]]


@pytest.fixture
def rewards(tmp_path: Path) -> Any:
    """The module of SOURCE, loaded the way reward references load files."""
    import sys

    from hfsdk_rewards.loading import resolve_reward_function

    (tmp_path / "styled.py").write_text(SOURCE)
    module = sys.modules[resolve_reward_function(f"{tmp_path}/styled.py:native").fn.__module__]
    module.path = tmp_path / "styled.py"
    return module


def _columns(**extra: Any) -> dict[str, list[Any]]:
    return {
        "data_source": ["toy", "toy"],
        "ground_truth": ["5", "2"],
        "extra_info": [{"index": 0}, {"index": 1}],
        "ability": ["math", "math"],
        "prompt_messages": MESSAGES,
        "rendered_prompt": ["<u> 2 + 3 = <a>", "<u> 1 + 1 = <a>"],
        **extra,
    }


def _score(module: Any, fn: str, responses: list[str], columns: dict, **spec: Any):  # type: ignore[no-untyped-def]
    config = {"functions": [{"name": f"{module.path}:{fn}", **spec}]}
    return compute_rewards(["2 + 3 =", "1 + 1 ="], responses, columns, config)


def test_styles_are_recognised_by_signature(rewards: Any) -> None:
    assert detect_style(rewards.compute_score) == "verl"
    assert detect_style(rewards.trl_fn) == "trl"
    assert detect_style(rewards.reward_func) == "openrlhf"
    assert detect_style(rewards.native) == "hfsdk"
    loaded = load_reward_functions({"functions": [{"name": f"{rewards.path}:trl_fn"}]})
    assert loaded[0].call.style == "trl"


def test_verl_is_called_per_sample_with_its_fields(rewards: Any) -> None:
    scores, metrics = _score(rewards, "compute_score", ["5", "3"], _columns())
    assert scores == [1.0, 0.0]
    assert rewards.CALLS == [("toy", "5", "5", {"index": 0}), ("toy", "3", "2", {"index": 1})]
    # Other numeric keys become metrics; strings (the prediction) are skipped.
    label = "compute_score"  # a file's function: metrics under its name
    assert metrics == {label: 0.5, f"{label}/len": 1.5}


def test_verl_settings_are_passed_like_reward_kwargs(rewards: Any) -> None:
    scores, _ = _score(rewards, "verl_with_kwargs", ["5", "3"], _columns(), kwargs={"bonus": 0.25})
    assert scores == [1.25, 0.25]


def test_verl_missing_ground_truth_is_one_line(rewards: Any) -> None:
    columns = _columns(
        ground_truth=[None, "2"],
        reward_model=[
            {"style": "rule", "ground_truth": None},
            {"style": "rule", "ground_truth": "2"},
        ],
    )
    with pytest.raises(RewardFunctionError) as info:
        _score(rewards, "compute_score", ["5", "3"], columns)
    message = str(info.value)
    assert "compute_score" in message and "sample 0 has no ground_truth" in message
    assert "reward_model: ['style']" in message and "\n" not in message


def test_verl_errors_name_function_sample_and_value(rewards: Any) -> None:
    with pytest.raises(
        RewardFunctionError,
        match=r"raised ValueError: cannot parse on sample 1 \(response 'boom'\)",
    ):
        _score(rewards, "verl_bad", ["x", "boom"], _columns())
    with pytest.raises(
        RewardFunctionError, match=r"verl_bad' returned 'high' \(str\) as the score of sample 0"
    ):
        _score(rewards, "verl_bad", ["x", "y"], _columns())


def test_trl_gets_messages_for_chat_data_and_columns_as_kwargs(rewards: Any) -> None:
    scores, _ = _score(rewards, "trl_fn", ["5", "3"], _columns())
    assert scores == [1.0, 0.0]
    prompts, completions, kwargs = rewards.CALLS[0]
    assert prompts == MESSAGES
    assert completions == [
        [{"role": "assistant", "content": "5"}],
        [{"role": "assistant", "content": "3"}],
    ]
    # Dataset columns arrive; the hidden rendering columns do not.
    assert kwargs == ["ability", "data_source", "extra_info"]


def test_trl_gets_strings_for_plain_data_and_none_counts_zero(rewards: Any) -> None:
    columns = _columns(prompt_messages=[None, None], ground_truth=["5", None])
    scores, _ = _score(rewards, "trl_fn", ["5", "2"], columns)
    assert scores == [1.0, 0.0]
    prompts, completions, _ = rewards.CALLS[0]
    assert prompts == ["2 + 3 =", "1 + 1 ="] and completions == ["5", "2"]


def test_trl_wrong_length_names_the_function(rewards: Any) -> None:
    with pytest.raises(RewardFunctionError, match=r"trl_short' returned 1 results for 2 samples"):
        _score(rewards, "trl_short", ["5", "3"], _columns())


def test_openrlhf_gets_queries_prompts_and_labels(rewards: Any) -> None:
    scores, _ = _score(rewards, "reward_func", ["5", "3"], _columns())
    assert scores == [1.0, 0.0]
    queries, prompts, labels = rewards.CALLS[0]
    assert prompts == ["<u> 2 + 3 = <a>", "<u> 1 + 1 = <a>"]
    assert queries == ["<u> 2 + 3 = <a>5", "<u> 1 + 1 = <a>3"]
    assert labels == ["5", "2"]


def test_openrlhf_label_column_choice(rewards: Any) -> None:
    columns = _columns(label=["3", "3"])
    scores, _ = _score(rewards, "reward_func", ["5", "3"], columns)
    assert scores == [0.0, 1.0]  # 'label' wins over ground_truth, as in OpenRLHF's default
    scores, _ = _score(
        rewards, "reward_func", ["5", "3"], columns, kwargs={"label_key": "ground_truth"}
    )
    assert scores == [1.0, 0.0]
    with pytest.raises(RewardFunctionError, match="label_key='answer' is not a dataset column"):
        _score(rewards, "reward_func", ["5", "3"], columns, kwargs={"label_key": "answer"})


def test_openrlhf_dict_result_with_extra_logs(rewards: Any) -> None:
    scores, metrics = _score(rewards, "reward_func_dict", ["5", "3"], _columns())
    assert scores == [2.0, 2.0]
    assert metrics["reward_func_dict/acc"] == 1.0


def test_explicit_style_wins_and_bad_styles_are_refused(rewards: Any) -> None:
    # 'plain(a, b)' matches no signature; declared verl, it is called per sample by keyword.
    with pytest.raises(RewardFunctionError, match=r"\(verl style\) raised TypeError"):
        _score(rewards, "plain", ["5", "3"], _columns(), style="verl")
    with pytest.raises(HfsdkError, match="style='ray'; expected one of hfsdk, openrlhf, trl, verl"):
        _score(rewards, "native", ["5", "3"], _columns(), style="ray")
    with pytest.raises(HfsdkError, match="registered hfsdk function; style='verl'"):
        compute_rewards(
            ["a"],
            ["b"],
            {"answer": ["b"]},
            {"functions": [{"name": "exact_match", "style": "verl"}]},
        )


def test_native_functions_do_not_see_hidden_columns(rewards: Any) -> None:
    scores, _ = _score(rewards, "native", ["5", "3"], _columns())
    assert scores == [0.5, 0.5]
    assert rewards.CALLS[0] == ["ability", "data_source", "extra_info", "ground_truth"]


def test_style_is_a_config_key() -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    cfg = load_run_config("grpo", None, ["reward.functions=[{name: exact_match, style: hfsdk}]"])
    assert cfg.reward.functions[0].style == "hfsdk"
    with pytest.raises(ConfigError, match="style"):
        load_run_config("grpo", None, ["reward.functions=[{name: exact_match, style: deepspeed}]"])
    assert torch  # torch tensors are what OpenRLHF functions return


VERL_SIGNATURES = """
def compute_score(solution_str, ground_truth, method):
    return 0.0

def verl_ok(data_source, solution_str, ground_truth, extra_info=None, method="strict"):
    return 0.0
"""


def test_a_verl_function_missing_a_field_is_refused_before_a_run(tmp_path: Path) -> None:
    # The verl style's own check (RewardCallStyle.check), run by the core's signature check.
    from hfsdk_rewards.signatures import signature_problem

    (tmp_path / "rw.py").write_text(VERL_SIGNATURES)

    def problem(name: str, **kwargs: object) -> str | None:
        (loaded,) = load_reward_functions(
            [{"name": f"{tmp_path / 'rw.py'}:{name}", "kwargs": kwargs}]
        )
        return signature_problem(loaded.call, ["prompt", "ground_truth"])

    found = problem("compute_score")
    assert found is not None and "(verl style) needs 'method'" in found
    assert "called once per sample" in found
    assert problem("compute_score", method="flexible") is None
    assert problem("verl_ok") is None


@pytest.mark.parametrize(
    ("fn", "style"),
    [("verl_with_kwargs", "verl"), ("trl_bonus", "trl"), ("reward_func_bonus", "openrlhf")],
)
def test_a_misspelt_setting_is_refused_before_a_run_in_every_style(
    rewards: Any, fn: str, style: str
) -> None:
    # verl, TRL and OpenRLHF pass every setting to the function (verl raises TypeError), so a
    # misspelt one is a one-line error before the run, not a silent default.
    from hfsdk_rewards.signatures import signature_problem

    def problem(**kwargs: object) -> str | None:
        (loaded,) = load_reward_functions([{"name": f"{rewards.path}:{fn}", "kwargs": kwargs}])
        assert loaded.call.style == style
        return signature_problem(loaded.call, list(_columns()))

    found = problem(bnous=0.25)
    assert found is not None and "\n" not in found
    assert "the setting 'bnous'" in found and "did you mean 'bonus'?" in found
    assert problem(bonus=0.25) is None
    scores, _ = _score(rewards, fn, ["5", "3"], _columns(), kwargs={"bonus": 0.25})
    assert scores[1] == 0.25  # the setting reaches the function


def test_a_setting_goes_to_a_function_with_var_kwargs(rewards: Any) -> None:
    from hfsdk_rewards.signatures import signature_problem

    (loaded,) = load_reward_functions(
        [{"name": f"{rewards.path}:trl_fn", "kwargs": {"anything": 1}}]
    )
    assert signature_problem(loaded.call, list(_columns())) is None
    _score(rewards, "trl_fn", ["5", "3"], _columns(), kwargs={"anything": 1})
    assert rewards.CALLS[0][2] == ["ability", "anything", "data_source", "extra_info"]


def test_without_the_plugin_the_styles_are_gone(
    rewards: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "migration")
    from hfsdk.core.plugin_manager import reset_plugin_manager

    reset_plugin_manager()
    # recognised by its signature no more: called as an hfsdk function, which it is not
    loaded = load_reward_functions({"functions": [{"name": f"{rewards.path}:trl_fn"}]})
    assert loaded[0].call.style == "hfsdk"
    with pytest.raises(ConfigError, match=r"style='verl'; expected one of hfsdk \(or leave"):
        load_run_config("grpo", None, ["reward.functions=[{name: exact_match, style: verl}]"])


def test_with_the_rewards_plugin_disabled_the_importers_still_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager

    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "rewards")
    reset_plugin_manager()
    status = {p.name: (p.status, p.error) for p in get_plugin_manager().plugins}
    assert status["rewards"][0] == "disabled"
    assert status["migration"] == ("loaded", None)


def test_verl_extra_info_is_a_dict_without_the_column(rewards: Any) -> None:
    # verl passes extra_info as a dict ({} when the row has none), never None.
    columns = _columns()
    del columns["extra_info"]
    _score(rewards, "compute_score", ["5", "3"], columns)
    _score(rewards, "compute_score", ["5", "3"], _columns(extra_info=[None, {"index": 1}]))
    assert [call[3] for call in rewards.CALLS] == [{}, {}, {}, {"index": 1}]
