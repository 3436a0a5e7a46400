"""verl ``compute_score`` results as verl reads them: a bool, a (score, info) tuple, a dict."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk_rewards import RewardFunctionError, compute_rewards

SOURCE = """
import numpy as np


def as_bool(data_source, solution_str, ground_truth, extra_info=None):
    return solution_str.strip() == ground_truth


def as_numpy_bool(data_source, solution_str, ground_truth, extra_info=None):
    return np.bool_(solution_str.strip() == ground_truth)


def as_tuple(data_source, solution_str, ground_truth, extra_info=None):
    return (float(solution_str.strip() == ground_truth), {"x": 1})


def as_dict_of_bool(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": solution_str.strip() == ground_truth, "acc": 0.5}


def as_empty_tuple(data_source, solution_str, ground_truth, extra_info=None):
    return ()
"""


def _scores(tmp_path: Path, fn: str) -> tuple[list[float], dict[str, float]]:
    (tmp_path / "verl_fns.py").write_text(SOURCE)
    config = {"functions": [{"name": f"{tmp_path}/verl_fns.py:{fn}"}]}
    columns = {"data_source": ["toy", "toy"], "ground_truth": ["5", "2"]}
    return compute_rewards(["2 + 3 =", "1 + 1 ="], [" 5", "3"], columns, config)


@pytest.mark.parametrize("fn", ["as_bool", "as_numpy_bool", "as_tuple"])
def test_a_bool_or_a_tuples_first_element_is_the_score(tmp_path: Path, fn: str) -> None:
    scores, _ = _scores(tmp_path, fn)
    assert scores == [1.0, 0.0]


def test_a_dicts_bool_score_counts_and_its_numbers_are_metrics(tmp_path: Path) -> None:
    scores, metrics = _scores(tmp_path, "as_dict_of_bool")
    assert scores == [1.0, 0.0]
    assert metrics["as_dict_of_bool/acc"] == 0.5


def test_an_empty_tuple_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(RewardFunctionError, match=r"returned \(\) \(tuple\) as the score"):
        _scores(tmp_path, "as_empty_tuple")
