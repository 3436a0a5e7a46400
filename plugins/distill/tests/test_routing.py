"""Teacher routing by ``data_source`` and its config checks."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk.core.config import load_run_config
from hfsdk_distill.routing import route_rows, routing_problems, teacher_for_unrouted

_PATHS = ["actor.model_path=/m/student", "teacher.model_path=/m/teacher"]


def test_rows_go_to_their_source_teacher_and_the_rest_to_the_fallback() -> None:
    plan = route_rows(
        ["math", "code", "chat", "math"], 4, {"math": "t_math", "code": "t_code"}, "t0"
    )
    assert plan == {"t_math": [0, 3], "t_code": [1], "t0": [2]}


def test_without_routes_or_the_column_every_row_goes_to_the_fallback() -> None:
    assert route_rows(None, 3, {}, "t0") == {"t0": [0, 1, 2]}


def test_routes_by_a_column_the_data_lacks_are_refused_in_one_line() -> None:
    # Before: every row went to the fallback, the routes silently unused.
    with pytest.raises(
        hfsdk.HfsdkError,
        match=r"route_key='domain'; columns: data_source, uid.*set algorithm\.route_key",
    ) as caught:
        route_rows(None, 3, {"math": "t_math"}, "t0", column="domain",
                   columns=["data_source", "uid"])  # fmt: skip
    assert "\n" not in str(caught.value)


def test_an_unrouted_source_without_a_default_is_refused_in_one_line() -> None:
    with pytest.raises(hfsdk.HfsdkError, match=r"data_source 'chat'.*does not route"):
        route_rows(["math", "chat"], 2, {"math": "t_math"}, None)


def test_default_teacher_null_is_the_first_and_empty_is_none() -> None:
    assert teacher_for_unrouted(None, ("a", "b")) == "a"
    assert teacher_for_unrouted("b", ("a", "b")) == "b"
    assert teacher_for_unrouted("", ("a", "b")) is None


def test_routes_must_name_teacher_roles() -> None:
    problems = routing_problems({"math": "actor"}, "nobody", ("teacher",))
    assert len(problems) == 2
    assert "teacher_routes.math is 'actor'" in problems[0]
    assert "default_teacher is 'nobody'" in problems[1]


def test_the_run_config_refuses_a_route_to_a_missing_teacher() -> None:
    with pytest.raises(hfsdk.ConfigError, match=r"teacher_routes\.math is 'teacher_math'"):
        load_run_config("distill", None, [*_PATHS, "algorithm.teacher_routes={math: teacher_math}"])


def test_a_default_teacher_of_none_without_routes_is_refused() -> None:
    # Before: accepted; every step failed on its first row, after generating.
    with pytest.raises(
        hfsdk.ConfigError, match=r"default_teacher='' .*teacher_routes is empty.*every row"
    ) as caught:
        load_run_config("distill", None, [*_PATHS, "algorithm.default_teacher=''"])
    assert "\n" not in str(caught.value)


def test_the_run_config_refuses_a_reference_kl() -> None:
    with pytest.raises(hfsdk.ConfigError, match="no reference role"):
        load_run_config("distill", None, [*_PATHS, "algorithm.kl_loss_coef=0.1"])


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_the_run_config_refuses_an_estimator_that_ignores_the_teacher(estimator: str) -> None:
    # GRPO's estimator takes teacher_log_probs among its unused keywords: the teacher was
    # dropped without a word while distill/reverse_kl was still logged.
    with pytest.raises(hfsdk.ConfigError, match=rf"advantage_estimator='{estimator}'.*reverse_kl"):
        load_run_config("distill", None, [*_PATHS, f"algorithm.advantage_estimator={estimator}"])


@pytest.mark.parametrize(
    "setting",
    ["algorithm.kl_coef=0.1", "algorithm.kl_controller=adaptive", "algorithm.kl_estimator=k3",
     "algorithm.target_kl=0.5", "algorithm.kl_horizon=500"],
)  # fmt: skip
def test_the_run_config_refuses_reference_kl_settings_it_never_reads(setting: str) -> None:
    # Before: accepted and ignored (distill never calls rewards_with_kl, and its batch has no
    # ref_log_probs for a KL loss).
    name = setting.split("=")[0]
    with pytest.raises(hfsdk.ConfigError, match=rf"{name}=.*never reads it") as caught:
        load_run_config("distill", None, [*_PATHS, setting])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("algo", ["grpo", "remax", "ppo"])
def test_reverse_kl_is_refused_for_an_algorithm_without_teachers(algo: str) -> None:
    # Before: accepted; the run failed at the first advantage, after generating and scoring.
    with pytest.raises(hfsdk.ConfigError, match=rf"reverse_kl needs .*algorithm '{algo}'"):
        load_run_config(algo, None, ["algorithm.advantage_estimator=reverse_kl"])
