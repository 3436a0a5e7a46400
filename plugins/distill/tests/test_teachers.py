"""Teachers named by config (``algorithm.teachers``): one frozen role each, rows routed by
``data_source``; the refusals; and two real teachers whose scores each row carries."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import hfsdk
from hfsdk import run_spec
from hfsdk.core.config import load_run_config
from hfsdk_testing import FakeRun, fake_prompts

_TEACHERS = "algorithm.teachers={math: teacher_math, code: teacher_code}"
_PATHS = [
    "actor.model_path=/m/student",
    "teacher_math.model_path=/m/math",
    "teacher_code.model_path=/m/code",
]


def test_each_named_teacher_is_a_frozen_role_with_its_own_section() -> None:
    config = load_run_config("distill", None, [_TEACHERS, *_PATHS])
    spec = run_spec(config)
    assert spec.roles_of_kind("frozen_policy") == ("teacher_math", "teacher_code")
    assert spec.role_names == ("actor", "teacher_math", "teacher_code", "reward")
    assert (config.teacher_math.model_path, config.teacher_code.model_path) == (
        "/m/math",
        "/m/code",
    )
    assert "teacher" not in config.sections  # the spec's own teacher is replaced
    # The registered spec is untouched: a run without algorithm.teachers keeps 'teacher'.
    plain = load_run_config("distill", None, ["actor.model_path=/m/s", "teacher.model_path=/m/t"])
    assert run_spec(plain).roles_of_kind("frozen_policy") == ("teacher",)


def test_on_the_default_task_each_teacher_gets_the_teacher_preset() -> None:
    from hfsdk_distill.student import teacher_model_path

    config = load_run_config("distill", None, [_TEACHERS])
    assert config.teacher_math.model_path == config.teacher_code.model_path == teacher_model_path()
    assert config.teacher_math.forward_micro_batch_size == 64


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algorithm.teachers={math: actor}"], r"teachers\.math is 'actor'"),
        (["algorithm.teachers={math: Teacher-A}"], r"teachers\.math is 'Teacher-A'"),
        # A teacher named like another section (an internal error, or that section's keys).
        *(([f"algorithm.teachers={{math: {name}}}"], rf"teachers\.math is '{name}'")
          for name in ("trainer", "placement", "rollout", "data", "algorithm")),
        # Before: a name the run config itself answers (config.algo is the algorithm's
        # name) was accepted and its NAME.model_path never reached the teacher.
        *(([f"algorithm.teachers={{math: {name}}}", f"{name}.model_path=/m/t"],
           rf"teachers\.math is '{name}'.*run config's own attribute")
          for name in ("sections", "to_dict", "to_yaml")),
        (["algorithm.teachers={math: algo}"], r"teachers\.math is 'algo'.*own attribute"),
        # algo.model_path=... sets the algorithm's name itself: refused before any teacher
        (["algorithm.teachers={math: algo}", "algo.model_path=/m/t"],
         r"algo is the algorithm's name, never a section or role"),
        ([_TEACHERS, "algorithm.teacher_routes={math: teacher_math}"], "both set"),
        # Before: every row went to the weighted teachers, the routed one was built, never
        # called.
        ([_TEACHERS, "algorithm.teacher_weights={teacher_math: 1}"],
         r"algorithm\.teachers and algorithm\.teacher_weights are both set"),
        ([_TEACHERS, "teacher.model_path=/m/t"], "unknown config section 'teacher'"),
        ([_TEACHERS, "placement.mode=auto"], "placement: auto with algorithm.teachers"),
        # Off the default task nothing fills a teacher in: a missing one is refused.
        ([_TEACHERS, "data.train_files=[/d/a.jsonl]", "actor.model_path=/m/s",
          "teacher_math.model_path=/m/math"], r"code to 'teacher_code', whose model_path"),
        (["algorithm.distill_coef=0"], r"all 0: nothing would be learned"),
        # ... and so is the spec's own teacher (it distilled the student into itself).
        (["data.train_files=[/d/a.jsonl]", "actor.model_path=/m/s"],
         r"teacher\.model_path is not set \(the teacher would be the student itself\)"),
    ],
)  # fmt: skip
def test_bad_teacher_config_is_refused_in_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(hfsdk.ConfigError, match=message) as caught:
        load_run_config("distill", None, overrides)
    assert "\n" not in str(caught.value)


def test_rows_go_to_the_teacher_named_for_their_source(
    teacher_answers: Callable[[FakeRun, str, float], None],
) -> None:
    run = FakeRun.for_algorithm("distill", [_TEACHERS, *_PATHS])
    teacher_answers(run, "teacher_math", -1.0)
    teacher_answers(run, "teacher_code", -5.0)
    prompts = fake_prompts(3)
    prompts["data_source"] = ["code", "math", "code"]
    metrics = run.algorithm.step(prompts)
    sources = list(run.role("actor").batches["update_actor"]["data_source"])
    batch = run.role("actor").batches["update_actor"]
    mask = batch["response_mask"].float()
    scores = [-5.0 if source == "code" else -1.0 for source in sources]
    expected = torch.tensor(scores).unsqueeze(-1) * mask
    assert torch.equal(batch["teacher_log_probs"], expected)
    assert set(run.role("teacher_code").batches["compute_ref_log_prob"]["data_source"]) == {"code"}
    assert set(run.role("teacher_math").batches["compute_ref_log_prob"]["data_source"]) == {"math"}
    assert metrics["distill/teacher_code/rows"] == 2 * metrics["distill/teacher_math/rows"]


def test_a_source_no_teacher_is_named_for_is_refused_at_run_time() -> None:
    run = FakeRun.for_algorithm("distill", [_TEACHERS, *_PATHS])
    prompts = fake_prompts(2)
    prompts["data_source"] = ["math", "chat"]
    with pytest.raises(hfsdk.HfsdkError, match=r"data_source 'chat', which algorithm\.teachers"):
        run.algorithm.step(prompts)
    # default_teacher takes the sources no teacher is named for.
    run = FakeRun.for_algorithm(
        "distill", [_TEACHERS, *_PATHS, "algorithm.default_teacher=teacher_math"]
    )
    run.algorithm.step(prompts)
    scored = run.role("teacher_math").batches["compute_ref_log_prob"]
    assert set(scored["data_source"]) == {"math", "chat"} and len(scored) == len(
        run.role("actor").batches["update_actor"]
    )


def test_data_without_the_route_column_is_refused_at_run_time() -> None:
    run = FakeRun.for_algorithm("distill", [_TEACHERS, *_PATHS])
    with pytest.raises(hfsdk.HfsdkError, match=r"by their 'data_source' column, which this data"):
        run.step()


@pytest.mark.slow
@pytest.mark.heavy
def test_two_real_teachers_each_score_their_own_rows(tmp_path: Path) -> None:
    """The default task's warm model teaches 'math', its less-trained copy 'code'; each row's
    teacher log-probs in the update equal its own teacher's, scored alone on the same batch."""
    from hfsdk.core.trainer.trainer import Trainer
    from hfsdk_backend_fsdp.actor import ReferenceEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
    from hfsdk_distill.student import student_model_path, teacher_model_path
    from hfsdk_run_records.step_dump import read_step_dump

    sums = [(a, b) for a in range(10) for b in range(10)][:8]
    data = tmp_path / "train.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {"prompt": f"{a} + {b} =", "answer": str(a + b),
                 "data_source": "math" if i % 2 else "code"}
            ) + "\n"
            for i, (a, b) in enumerate(sums)
        )
    )  # fmt: skip
    paths = {"math": teacher_model_path(), "code": student_model_path()}
    overrides = [
        _TEACHERS,
        f"teacher_math.model_path={paths['math']}",
        f"teacher_code.model_path={paths['code']}",
        f"actor.model_path={student_model_path()}",
        f"data.train_files=[{data}]",
        "reward.functions=[{name: default_task}]",
        "data.batch_size=8",
        "algorithm.n_samples_per_prompt=2",
        "rollout.max_response_length=6",
        "actor.mini_batch_size=16",
        "actor.micro_batch_size=16",
        "trainer.total_steps=1",
        "trainer.rollout_dump=true",
    ]
    run_dir = tmp_path / "run"
    (row,) = Trainer(load_run_config("distill", None, overrides), run_dir, quiet=True).fit()
    batch = read_step_dump(run_dir, 1, for_what="this test").update
    assert batch is not None
    sources = list(batch["data_source"])
    assert sources.count("math") == sources.count("code") == 8
    mask = batch["response_mask"].bool()
    alone = {}
    for source, path in paths.items():
        engine = ReferenceEngine(FSDPRoleConfig(model_path=path), role=f"teacher_{source}")
        alone[source] = engine.compute_ref_log_prob(batch.select())["ref_log_probs"]
    got = batch["teacher_log_probs"]
    for i, source in enumerate(sources):
        m = mask[i]
        assert torch.allclose(got[i][m], alone[source][i][m].to(got.dtype), atol=1e-5), source
        other = "code" if source == "math" else "math"
        # The two teachers disagree, so a row scored by the wrong one would show.
        assert (got[i][m] - alone[other][i][m]).abs().max() > 1e-2, i
    assert row["distill/teacher_math/rows"] == row["distill/teacher_code/rows"] == 8


def test_the_reserved_teacher_names_are_the_run_configs_own_attributes() -> None:
    from hfsdk.core.config import RunConfig
    from hfsdk_distill.teachers import _RUN_CONFIG_ATTRIBUTES

    own = {
        name
        for name in dir(RunConfig)
        if not name.startswith("_") and not isinstance(getattr(RunConfig, name), property)
    }
    assert set(_RUN_CONFIG_ATTRIBUTES) == own
