"""compute_rewards: weighted sums, metrics, async functions, and every kind of bad result."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from hfsdk.core.config.signal_config import SignalConfig, SignalFunction
from hfsdk.core.errors import HfsdkError
from hfsdk_rewards import RewardFunctionError, compute_rewards, load_reward_functions

PROMPTS = ["What is 2+3?", "What is 1+1?", "Say hi"]
RESPONSES = ["It is 5", "It is 3", "hi"]
COLUMNS = {"answer": ["5", "2", "hi"]}

USER_FUNCTIONS = """
import asyncio


def with_extras(prompts, responses, **columns):
    return [{"score": len(r), "chars": len(r), "note": "text is skipped"} for r in responses]


def only_answer(prompts, responses, answer):
    return [float(r.endswith(a)) for r, a in zip(responses, answer)]


def scaled(prompts, responses, factor=1.0):
    return [factor * len(p) for p in prompts]


async def slow_len(prompts, responses, **columns):
    await asyncio.sleep(0.01)
    return [float(len(r)) for r in responses]


def fails_on_hi(prompts, responses, **columns):
    return [1.0 / (r != "hi") for r in responses]


def fails_only_in_batches(prompts, responses, **columns):
    if len(responses) > 1:
        raise RuntimeError("batch too large")
    return [0.0]


async def async_fails(prompts, responses, **columns):
    if "hi" in responses:
        raise KeyError("missing key")
    return [0.0] * len(responses)


def nan_second(prompts, responses, **columns):
    return [0.0, math.nan, 0.0][: len(responses)]


import math


def too_few(prompts, responses, **columns):
    return [1.0]


def gives_none(prompts, responses, **columns):
    return [1.0, None, 2.0]


def no_score(prompts, responses, **columns):
    return [{"value": 1.0}] * len(responses)


def gives_dict(prompts, responses, **columns):
    return {"score": 1.0}


def numpy_scores(prompts, responses, **columns):
    import numpy as np

    return np.arange(len(responses), dtype=np.float32)
"""


@pytest.fixture
def user_file(tmp_path: Path) -> str:
    path = tmp_path / "user_rewards.py"
    path.write_text(USER_FUNCTIONS)
    return str(path)


def fn(user_file: str, name: str, weight: float = 1.0, **kwargs: object) -> dict[str, object]:
    return {"name": f"{user_file}:{name}", "weight": weight, "kwargs": kwargs}


def test_weighted_sum_of_builtins_by_hand() -> None:
    config = SignalConfig(
        functions=(
            SignalFunction(name="exact_match", weight=2.0),
            SignalFunction(
                name="length_penalty", weight=0.5, kwargs={"max_length": 5, "buffer_length": 2}
            ),
        )
    )
    scores, metrics = compute_rewards(PROMPTS, RESPONSES, COLUMNS, config)
    # exact: [1, 0, 0] ("hi" has no number); length 7 > 5 -> −1, 7 -> −1, 2 -> 0
    assert scores == [2.0 - 0.5, -0.5, 0.0]
    assert metrics["exact_match"] == pytest.approx(1 / 3)
    assert metrics["exact_match/answer_found"] == pytest.approx(2 / 3)
    assert metrics["length_penalty"] == pytest.approx(-2 / 3)


def test_dict_results_columns_kwargs_async_and_numpy(user_file: str) -> None:
    config = [
        fn(user_file, "with_extras", 0.5),
        fn(user_file, "only_answer"),
        fn(user_file, "scaled", 0.0, factor=2.0),
        fn(user_file, "slow_len"),
        fn(user_file, "numpy_scores"),
        fn(user_file, "only_answer", 10.0),
    ]
    scores, metrics = compute_rewards(PROMPTS, RESPONSES, {**COLUMNS, "other": [1, 2, 3]}, config)
    lengths = [7.0, 7.0, 2.0]
    expected = [
        0.5 * n + a + n + i + 10 * a
        for i, (n, a) in enumerate(zip(lengths, [1, 0, 1], strict=True))
    ]
    assert scores == pytest.approx(expected)
    # A file's function logs under its own name (not the file path).
    assert metrics["with_extras/chars"] == pytest.approx(16 / 3)
    assert "with_extras/note" not in metrics
    assert metrics["scaled"] == pytest.approx(2 * sum(map(len, PROMPTS)) / 3)
    assert metrics["only_answer#2"] == pytest.approx(2 / 3)
    assert not any(user_file in key for key in metrics)


def test_bool_extras_are_logged_as_rates_but_a_bool_score_is_refused() -> None:
    import numpy as np

    from hfsdk_rewards.calling import check_result

    # verl's math scorers return ``acc`` as a bool (or numpy's): its mean is the accuracy.
    result = check_result(
        "f", [{"score": 1.0, "acc": True, "ok": np.True_}, {"score": 0.0, "acc": False}], 2
    )
    assert result.metrics == {"acc": 0.5, "ok": 1.0}
    with pytest.raises(RewardFunctionError, match=r"returned True \(bool\) as the score"):
        check_result("f", [{"score": True}], 1)


def test_functions_of_the_same_name_keep_their_full_names(user_file: str, tmp_path: Path) -> None:
    other = tmp_path / "other.py"
    other.write_text(
        "def scaled(prompts, responses, **columns):\n    return [1.0] * len(prompts)\n"
    )
    config = [fn(user_file, "scaled"), {"name": f"{other}:scaled"}, fn(user_file, "slow_len")]
    _, metrics = compute_rewards(PROMPTS, RESPONSES, COLUMNS, config)
    assert metrics[f"{other}:scaled"] == 1.0
    assert metrics[f"{user_file}:scaled"] == pytest.approx(sum(map(len, PROMPTS)) / 3)
    assert "slow_len" in metrics and "scaled" not in metrics


def test_async_functions_also_work_inside_a_running_event_loop(user_file: str) -> None:
    async def main() -> list[float]:
        scores, _ = compute_rewards(PROMPTS, RESPONSES, COLUMNS, [fn(user_file, "slow_len")])
        return scores

    assert asyncio.run(main()) == [7.0, 7.0, 2.0]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "fails_on_hi",
            r"'.*:fails_on_hi' raised ZeroDivisionError: .* on sample 2 \(response 'hi'\)",
        ),
        ("async_fails", r"'.*:async_fails' raised KeyError: 'missing key' on sample 2"),
        (
            "fails_only_in_batches",
            r"on the batch of 3 samples, though none of the first 3 fails alone",
        ),
        ("nan_second", r"non-finite score nan for sample 1"),
        ("too_few", r"returned 1 results for 3 samples"),
        ("gives_none", r"returned None \(NoneType\) as the score of sample 1"),
        ("no_score", r"dict without 'score' for sample 0 \(keys: \['value'\]\)"),
        ("gives_dict", r"returned a dict; expected a list"),
    ],
)
def test_bad_functions_are_reported_with_name_and_sample(
    user_file: str, name: str, message: str
) -> None:
    with pytest.raises(RewardFunctionError, match=message):
        compute_rewards(
            PROMPTS, RESPONSES, COLUMNS, [fn(user_file, "slow_len"), fn(user_file, name)]
        )


def test_function_errors_with_a_clear_message_keep_it() -> None:
    with pytest.raises(
        RewardFunctionError, match="'exact_match': exact_match needs the dataset column"
    ):
        compute_rewards(PROMPTS, RESPONSES, {}, [{"name": "exact_match"}])


def test_kwargs_are_read_as_the_run_config_is() -> None:
    # YAML reads 1e-1 as the string '1e-1': before, it stayed one and the function returned
    # it as its score; read like every other config value, it is the number 0.1.
    config = [{"name": "exact_match", "kwargs": {"correct_score": "1e-1"}}]
    scores, _ = compute_rewards(["1 + 1 ="], ["2"], {"answer": ["2"]}, config)
    assert scores == [0.1]
    with pytest.raises(HfsdkError, match=r"'kwargs.correct_score': expected a number, got 'many'"):
        load_reward_functions([{"name": "exact_match", "kwargs": {"correct_score": "many"}}])


def test_config_errors() -> None:
    with pytest.raises(HfsdkError) as info:
        load_reward_functions([{"name": "exact_match", "kwargs": {"patern": "x"}}])
    message = str(info.value)  # one line, the allowed keys once
    assert message.startswith("reward function 'exact_match': unknown kwarg 'patern'; did you ")
    assert message.count("answer_pattern") == 2 and message.count("allowed") == 1
    assert "\n" not in message
    with pytest.raises(HfsdkError) as info:
        load_reward_functions([{"name": "length_penalty",
                                "kwargs": {"max_length": 10, "buffer_length": 20}}])  # fmt: skip
    assert "config key ''" not in str(info.value)
    assert str(info.value) == (
        "reward function 'length_penalty': kwargs {'max_length': 10, 'buffer_length': 20} do "
        "not fit together: buffer_length=20 exceeds max_length=10; change one of them"
    )
    with pytest.raises(HfsdkError, match=r"^reward function 'math_verify': bad value for config "
                       r"key 'kwargs.float_rounding': must be >= 0: -1$"):  # fmt: skip
        load_reward_functions([{"name": "math_verify", "kwargs": {"float_rounding": -1}}])
    with pytest.raises(HfsdkError, match="weight=nan; expected a finite number"):
        load_reward_functions([{"name": "exact_match", "weight": math.nan}])
    with pytest.raises(HfsdkError, match="lists no functions"):
        load_reward_functions(SignalConfig())
    with pytest.raises(HfsdkError, match="column 'answer' has 2 values for 3 responses"):
        compute_rewards(PROMPTS, RESPONSES, {"answer": ["1", "2"]}, [{"name": "exact_match"}])
    with pytest.raises(HfsdkError, match="3 prompts but 2 responses"):
        compute_rewards(PROMPTS, RESPONSES[:2], {}, [{"name": "format_check"}])


def test_setting_named_like_a_column_is_an_error(user_file: str) -> None:
    with pytest.raises(RewardFunctionError, match=r"setting\(s\) \['answer'\] have the same name"):
        compute_rewards(PROMPTS, RESPONSES, COLUMNS, [fn(user_file, "scaled", answer=1)])


def test_empty_batch() -> None:
    assert compute_rewards([], [], {}, [{"name": "format_check"}]) == ([], {})


def test_the_docs_reward_entries_of_registered_functions_load() -> None:
    # docs/training.md showed exact_match with kwargs {pattern: ...}, which is refused
    # (the setting is answer_pattern).
    import yaml

    import hfsdk

    registered = set(hfsdk.get_registry("reward_functions"))
    docs = Path(__file__).resolve().parents[3] / "docs"
    entries = []
    for page in sorted(docs.glob("*.md")):
        for line in page.read_text().splitlines():
            item = line.strip()
            if item.startswith("- {name:") and "kwargs" in item:
                entry = yaml.safe_load(item[2:])
                if entry["name"] in registered:
                    entries.append((page.name, entry))
    assert any(page == "training.md" for page, _ in entries)
    for page, entry in entries:
        try:
            load_reward_functions([entry])
        except HfsdkError as exc:
            raise AssertionError(f"{page}: {entry}: {exc}") from None
