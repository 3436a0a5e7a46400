"""Distillation's step() against fake roles: who scores what, the advantages and the metrics."""

from __future__ import annotations

import attrs
import pytest
import torch

import hfsdk
from hfsdk import AlgorithmContext, Batch, RoleSpec
from hfsdk.core.config import load_run_config
from hfsdk_distill.spec import DISTILL_SPEC
from hfsdk_testing import FakeRole, FakeRun, FakeSignal, fake_prompts

_PATHS = ["actor.model_path=/m/student", "teacher.model_path=/m/teacher"]


def test_teacher_scores_the_students_samples_and_the_advantage_is_their_gap() -> None:
    run = FakeRun.for_algorithm("distill", _PATHS, rewards=[1.0, 0.0])
    metrics = run.step()
    assert run.order == [
        ("actor", "generate_sequences"),
        ("actor", "compute_log_prob"),
        ("teacher", "compute_ref_log_prob"),
        ("reward", "score"),
        ("actor", "update_actor"),
    ]
    # Every worker call was dispatched before any was waited on.
    assert [e[0] for e in run.timeline] == ["submit", "submit", "result", "result"]
    generated = run.role("actor").batches["compute_log_prob"]
    assert torch.equal(run.role("teacher").batches["compute_ref_log_prob"]["responses"],
                       generated["responses"])  # fmt: skip
    batch = run.role("actor").batches["update_actor"]
    mask = batch["response_mask"]
    gap = (batch["teacher_log_probs"] - batch["old_log_probs"]) * mask
    # Pure distillation by default: the reward is logged, not trained on.
    assert torch.allclose(batch["advantages"], gap)
    assert "ref_log_probs" not in batch  # the teacher is no KL reference of the update
    expected_kl = float((-gap).sum() / mask.sum())
    assert metrics["distill/reverse_kl"] == pytest.approx(expected_kl)
    teacher_mean = float((batch["teacher_log_probs"] * mask).sum() / mask.sum())
    assert metrics["distill/teacher_log_prob_mean"] == pytest.approx(teacher_mean)
    student_mean = float((batch["old_log_probs"] * mask).sum() / mask.sum())
    assert metrics["distill/student_log_prob_mean"] == pytest.approx(student_mean)
    assert metrics["reward/mean"] == pytest.approx(0.5)
    timings = {k[7:-2] for k in metrics if k.startswith("timing/")}
    assert timings <= set(DISTILL_SPEC.timings)


def test_reward_weight_adds_the_group_centred_reward() -> None:
    run = FakeRun.for_algorithm(
        "distill", [*_PATHS, "algorithm.reward_weight=0.5"], rewards=[1.0, 0.0, 0.0, 0.0]
    )
    run.step()
    batch = run.role("actor").batches["update_actor"]
    mask = batch["response_mask"]
    gap = (batch["teacher_log_probs"] - batch["old_log_probs"]) * mask
    # 2 prompts x 4 samples; scores cycle 1, 0, 0, 0: each group's mean is 0.25.
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0] * 2)
    assert torch.allclose(batch["advantages"], gap + 0.5 * (scores - 0.25)[:, None] * mask)


def _two_teacher_run(
    overrides: list[str] | None = None,
) -> tuple[object, dict[str, FakeRole], list]:
    spec = attrs.evolve(
        DISTILL_SPEC,
        name="distill_two",
        roles=(*DISTILL_SPEC.roles[:2], RoleSpec(name="teacher_code", kind="frozen_policy"),
               DISTILL_SPEC.roles[2]),
    )  # fmt: skip
    config = load_run_config("distill", None, [*_PATHS, *(overrides or [])])
    algorithm = attrs.evolve(config.algorithm, teacher_routes={"code": "teacher_code"})
    config = type(config)(algo="distill", sections={**config.sections, "algorithm": algorithm})
    log: list = []
    timeline: list = []
    kinds = {role.name: role.kind for role in spec.roles}
    roles = {
        name: FakeRole(name, log, seed=i, timeline=timeline, kind=kinds[name])
        for i, name in enumerate(("actor", "teacher", "teacher_code"))
    }
    signals = {"reward": FakeSignal("reward", log, [1.0, 0.0])}
    context = AlgorithmContext(config=config, roles=roles, signals=signals, spec=spec)
    return spec.program(context), roles, timeline


def test_several_teachers_are_routed_by_data_source() -> None:
    program, roles, timeline = _two_teacher_run()
    method = roles["teacher_code"].compute_ref_log_prob
    recorded = method.fn

    def constant(batch: Batch) -> Batch:  # the code teacher answers −7 on every valid token
        recorded(batch)
        return Batch.from_dict(tensors={"ref_log_probs": -7.0 * batch["response_mask"].float()})

    method.fn = constant
    prompts = fake_prompts(3)
    prompts["data_source"] = ["code", "math", "code"]
    metrics = program.step(prompts)
    # 4 samples per prompt: rows 0-3 and 8-11 are code, 4-7 math (the default teacher).
    code_rows = [0, 1, 2, 3, 8, 9, 10, 11]
    assert len(roles["teacher_code"].batches["compute_ref_log_prob"]) == 8
    assert (
        list(roles["teacher_code"].batches["compute_ref_log_prob"]["data_source"]) == ["code"] * 8
    )
    assert list(roles["teacher"].batches["compute_ref_log_prob"]["data_source"]) == ["math"] * 4
    # Both teachers were dispatched before either was waited on.
    submits = [e for e in timeline if e[0] == "submit"]
    assert len(submits) == 3 and timeline.index(submits[-1]) < len(submits)
    batch = roles["actor"].batches["update_actor"]
    mask = batch["response_mask"]
    # The code teacher's answer landed on the code rows, the other teacher's elsewhere.
    assert torch.equal(batch["teacher_log_probs"][code_rows], -7.0 * mask[code_rows].float())
    assert (batch["teacher_log_probs"][4:8] > -1.0).all()
    assert metrics["distill/teacher_code/rows"] == 8.0
    assert metrics["distill/teacher/rows"] == 4.0
    gap = (batch["old_log_probs"] - batch["teacher_log_probs"])[code_rows]
    expected = float((gap * mask[code_rows]).sum() / mask[code_rows].sum())
    assert metrics["distill/teacher_code/reverse_kl"] == pytest.approx(expected)


def test_listed_with_its_config_explained() -> None:
    assert "distill" in hfsdk.get_registry("algorithms")
    from hfsdk.core.config.help import field_help
    from hfsdk_distill.distill_config import DistillConfig

    helped = {f.name: f.help for f in field_help(DistillConfig)}
    for name in ("distill_coef", "reward_weight", "teacher_routes", "default_teacher"):
        assert helped[name]


def test_top_k_asks_every_teacher_and_hands_the_merged_top_k_to_the_update() -> None:
    from hfsdk_distill.top_k import TEACHER_TOP_K_IDS, TEACHER_TOP_K_LOG_PROBS

    program, roles, _timeline = _two_teacher_run(["algorithm.top_k=2"])
    asked: dict[str, int] = {}

    def top_k_answer(name: str, value: float):  # a teacher answering `value` on every slot
        def answer(batch: Batch) -> Batch:
            asked[name] = batch.meta[hfsdk.REF_TOP_K]
            shape = (*batch["responses"].shape, 2)
            return Batch.from_dict(
                tensors={
                    "ref_log_probs": torch.full(batch["responses"].shape, value),
                    "ref_top_k_log_probs": torch.full(shape, value),
                    "ref_top_k_ids": torch.full(shape, int(-value), dtype=torch.int64),
                }
            )

        return answer

    roles["teacher"].compute_ref_log_prob.fn = top_k_answer("teacher", -3.0)
    roles["teacher_code"].compute_ref_log_prob.fn = top_k_answer("teacher_code", -7.0)
    prompts = fake_prompts(3)
    prompts["data_source"] = ["code", "math", "code"]
    program.step(prompts)
    assert asked == {"teacher": 2, "teacher_code": 2}
    batch = roles["actor"].batches["update_actor"]
    assert "ref_top_k" not in batch.meta  # the ask went to the teachers only
    code_rows = [0, 1, 2, 3, 8, 9, 10, 11]
    top = batch[TEACHER_TOP_K_LOG_PROBS]
    assert top.shape == (12, batch["responses"].shape[1], 2)
    assert top[code_rows].eq(-7.0).all() and top[4:8].eq(-3.0).all()
    assert batch[TEACHER_TOP_K_IDS][code_rows].eq(7).all()
    assert batch[TEACHER_TOP_K_IDS][4:8].eq(3).all()


def test_without_top_k_the_teachers_are_not_asked_for_it() -> None:
    run = FakeRun.for_algorithm("distill", _PATHS)
    run.step()
    assert hfsdk.REF_TOP_K not in run.role("teacher").batches["compute_ref_log_prob"].meta
    assert "teacher_top_k_ids" not in run.role("actor").batches["update_actor"]
