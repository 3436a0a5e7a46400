"""Several teachers: the shipped ``distill_multi`` spec, routed by a column or mixed by weight."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import hfsdk
from hfsdk.core.config import load_run_config
from hfsdk_distill.distill_algorithm import mixture_log_probs
from hfsdk_distill.spec import multi_teacher_spec
from hfsdk_testing import FakeRun, fake_prompts

_PATHS = [
    "actor.model_path=/m/student",
    "teacher.model_path=/m/teacher",
    "teacher_2.model_path=/m/teacher_2",
]


def test_mixture_is_the_log_of_the_weighted_probabilities() -> None:
    a, b = torch.tensor([[-1.0, 0.0]]), torch.tensor([[-3.0, 0.0]])
    got = mixture_log_probs([a, b], [1.0, 3.0])  # normalised to 0.25 / 0.75
    assert float(got[0, 0]) == pytest.approx(math.log(0.25 * math.exp(-1) + 0.75 * math.exp(-3)))
    assert float(got[0, 1]) == pytest.approx(0.0, abs=1e-6)  # masked: every teacher's 0 stays 0


def test_the_shipped_spec_has_two_teacher_sections() -> None:
    entry = hfsdk.get_registry("algorithms")["distill_multi"]
    assert entry.impl.roles_of_kind("frozen_policy") == ("teacher", "teacher_2")
    config = load_run_config("distill_multi", None, _PATHS)
    assert config.teacher_2.model_path == "/m/teacher_2"
    # Without the paths, both teachers are the default task's warm-started model.
    from hfsdk_distill.student import teacher_model_path

    default = load_run_config("distill_multi")
    assert default.teacher.model_path == default.teacher_2.model_path == teacher_model_path()


def test_weighted_teachers_score_every_row_and_the_student_distills_their_mixture(
    teacher_answers: Callable[[FakeRun, str, float], None],
) -> None:
    run = FakeRun.for_algorithm(
        "distill_multi", [*_PATHS, "algorithm.teacher_weights={teacher: 1, teacher_2: 3}"]
    )
    teacher_answers(run, "teacher", -1.0)
    teacher_answers(run, "teacher_2", -3.0)
    metrics = run.step()
    rows = len(run.role("actor").batches["update_actor"])
    for role in ("teacher", "teacher_2"):
        assert len(run.role(role).batches["compute_ref_log_prob"]) == rows
    batch = run.role("actor").batches["update_actor"]
    mask = batch["response_mask"].bool()
    mixed = math.log(0.25 * math.exp(-1.0) + 0.75 * math.exp(-3.0))
    assert torch.allclose(batch["teacher_log_probs"][mask], torch.tensor(mixed))
    gap = (batch["teacher_log_probs"] - batch["old_log_probs"]) * mask
    assert torch.allclose(batch["advantages"], gap)
    student = float(batch["old_log_probs"][mask].mean())
    assert metrics["distill/teacher/reverse_kl"] == pytest.approx(student + 1.0, rel=1e-5)
    assert metrics["distill/teacher_2/reverse_kl"] == pytest.approx(student + 3.0, rel=1e-5)
    assert metrics["distill/reverse_kl"] == pytest.approx(student - mixed, rel=1e-5)


def test_rows_are_routed_by_the_configured_column(
    teacher_answers: Callable[[FakeRun, str, float], None],
) -> None:
    run = FakeRun.for_algorithm(
        "distill_multi",
        [*_PATHS, "algorithm.route_key=domain", "algorithm.teacher_routes={code: teacher_2}"],
    )
    teacher_answers(run, "teacher_2", -7.0)
    prompts = fake_prompts(2)
    prompts["domain"] = ["code", "math"]
    prompts["data_source"] = ["math", "code"]  # not the route key: ignored
    run.algorithm.step(prompts)
    assert list(run.role("teacher_2").batches["compute_ref_log_prob"]["domain"]) == ["code"] * 4
    assert list(run.role("teacher").batches["compute_ref_log_prob"]["domain"]) == ["math"] * 4
    batch = run.role("actor").batches["update_actor"]
    mask = batch["response_mask"].float()
    assert torch.equal(batch["teacher_log_probs"][:4], -7.0 * mask[:4])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algorithm.teacher_weights={teacher: 1, teacher_3: 1}"], "teacher_3.*not a teacher"),
        (["algorithm.teacher_weights={teacher: 0}"], r"weight must be > 0"),
        (["algorithm.teacher_weights={teacher: 1}", "algorithm.teacher_routes={a: teacher}"],
         "both set"),
        (["algorithm.teacher_weights={teacher: 1}", "algorithm.top_k=4"], "no top-k to ship"),
        # Before: teacher_2 was built (a model loaded) and never called.
        (["algorithm.teacher_weights={teacher: 1}"],
         r"teacher_weights gives teacher role 'teacher_2' no weight.*give it a weight"),
        # Before: both were accepted and did nothing (every row goes to every teacher).
        (["algorithm.teacher_weights={teacher: 1, teacher_2: 1}",
          "algorithm.default_teacher=teacher_2"], r"default_teacher='teacher_2' with .*weights"),
        (["algorithm.teacher_weights={teacher: 1, teacher_2: 1}", "algorithm.route_key=domain"],
         r"route_key='domain' with .*weights"),
        # Before: teacher_2 was built (a model loaded) and no route or default sent it a row.
        (["algorithm.teacher_routes={math: teacher}"],
         r"teacher role 'teacher_2' .*no route.*never called.*teacher_routes"),
        (["algorithm.teacher_routes={math: teacher_2}", "algorithm.default_teacher=''"],
         r"teacher role 'teacher' .*no route.*never called"),
    ],
)  # fmt: skip
def test_bad_teacher_settings_are_refused_in_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(hfsdk.ConfigError, match=message) as caught:
        load_run_config("distill_multi", None, [*_PATHS, *overrides])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "overrides",
    [
        [],  # no routes: every row to the first teacher, as documented
        ["algorithm.teacher_routes={math: teacher_2}"],  # the rest to the first teacher
        [
            "algorithm.teacher_routes={math: teacher, code: teacher_2}",
            "algorithm.default_teacher=''",
        ],
        ["algorithm.teacher_routes={math: teacher}", "algorithm.default_teacher=teacher_2"],
    ],
)
def test_routes_that_reach_every_teacher_are_accepted(overrides: list[str]) -> None:
    config = load_run_config("distill_multi", None, [*_PATHS, *overrides])
    assert config.algorithm.teacher_weights == {}


def test_routes_by_a_column_the_data_lacks_are_refused_at_the_step() -> None:
    # Before: with route_key misspelt, every row went to the first teacher without a word.
    run = FakeRun.for_algorithm(
        "distill_multi",
        [*_PATHS, "algorithm.route_key=domian", "algorithm.teacher_routes={code: teacher_2}"],
    )
    prompts = fake_prompts(2)
    prompts["domain"] = ["code", "math"]
    with pytest.raises(
        hfsdk.HfsdkError, match=r"route_key='domian'; columns: .*domain.*set algorithm\.route_key"
    ) as caught:
        run.algorithm.step(prompts)
    assert "\n" not in str(caught.value)
    assert "compute_ref_log_prob" not in run.role("teacher").batches


def test_one_weighted_teacher_is_fine_where_it_is_the_only_teacher() -> None:
    # The refusal of an unweighted teacher is about roles left idle, not about one weight.
    config = load_run_config(
        "distill", None, ["actor.model_path=/m/s", "teacher.model_path=/m/t",
                          "algorithm.teacher_weights={teacher: 1}"]
    )  # fmt: skip
    assert config.algorithm.teacher_weights == {"teacher": 1.0}


def test_a_spec_of_your_own_with_three_teachers() -> None:
    spec = multi_teacher_spec("distill_three", ("t_math", "t_code", "t_chat"))
    assert spec.roles_of_kind("frozen_policy") == ("t_math", "t_code", "t_chat")
    assert spec.program is hfsdk.get_registry("algorithms")["distill"].impl.program
    with pytest.raises(ValueError, match="distinct"):
        multi_teacher_spec("bad", ("t", "t"))


@pytest.mark.slow
def test_mixing_two_copies_of_a_teacher_is_that_teacher(tmp_path: Path) -> None:
    from hfsdk.core.trainer.trainer import Trainer

    # On the default task both teachers are the same model, so their mixture must equal
    # each of them: any mixing or weighting error shows as a gap.
    config = load_run_config(
        "distill_multi",
        None,
        ["algorithm.teacher_weights={teacher: 1, teacher_2: 2}", "trainer.total_steps=2"],
    )
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    for row in rows:
        kl = row["distill/reverse_kl"]
        assert row["distill/teacher/reverse_kl"] == pytest.approx(kl, abs=1e-4)
        assert row["distill/teacher_2/reverse_kl"] == pytest.approx(kl, abs=1e-4)


def test_the_docs_example_builds_the_spec_it_names() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs" / "algorithms.md"
    blocks = docs.read_text().split("```python\n")[1:]
    (example,) = [b.split("```")[0] for b in blocks if "multi_teacher_spec" in b]
    namespace: dict[str, object] = {}
    exec(example, namespace)  # the example exactly as written
    spec = namespace["THREE_TEACHERS"]
    assert spec.name == "distill_three"
    assert spec.roles_of_kind("frozen_policy") == ("t_math", "t_code", "t_chat")
