"""The top-k logit KL against hand computations, and the actor objective that carries it."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

import hfsdk
from hfsdk import Batch
from hfsdk.core.config import load_run_config
from hfsdk_distill.objective import distill_actor_objective
from hfsdk_distill.top_k import (
    TEACHER_TOP_K_LOG_PROBS,
    TopKKLConfig,
    top_k_kl_loss,
    top_k_kl_per_token,
)

_PATHS = ["actor.model_path=/m/student", "teacher.model_path=/m/teacher"]

# One position, k = 2: the teacher puts 0.6 and 0.3 on its two tokens (tail 0.1), the
# student 0.2 and 0.4 on the same tokens (tail 0.4).
_TEACHER = [0.6, 0.3]
_STUDENT = [0.2, 0.4]


def _log(values: list[float]) -> torch.Tensor:
    return torch.tensor([[[math.log(v) for v in values]]])


def test_bucket_tail_is_the_kl_over_k_plus_one_outcomes() -> None:
    got = top_k_kl_per_token(_log(_TEACHER), _log(_STUDENT), "bucket")
    expected = 0.6 * math.log(0.6 / 0.2) + 0.3 * math.log(0.3 / 0.4) + 0.1 * math.log(0.1 / 0.4)
    assert got.shape == (1, 1)
    assert float(got) == pytest.approx(expected, rel=1e-5)


def test_renormalized_tail_is_the_kl_inside_the_top_k() -> None:
    got = top_k_kl_per_token(_log(_TEACHER), _log(_STUDENT), "renormalize")
    t, s = [v / 0.9 for v in _TEACHER], [v / 0.6 for v in _STUDENT]
    expected = sum(p * math.log(p / q) for p, q in zip(t, s, strict=True))
    assert float(got) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        # bucket: d/ds_j = -p_j + p_tail * q_j / q_tail (the tail's log-mass moves with s_j):
        # -0.6 + 0.1 * 0.2 / 0.4 and -0.3 + 0.1 * 0.4 / 0.4.
        ("bucket", [-0.55, -0.2]),
        # renormalize: d/ds_j = -p^_j + q^_j with p^ = (2/3, 1/3), q^ = (1/3, 2/3).
        ("renormalize", [-1 / 3, 1 / 3]),
    ],
)
def test_the_gradient_equals_the_hand_computation(tail: str, expected: list[float]) -> None:
    student = _log(_STUDENT).requires_grad_(True)
    batch = Batch.from_dict(tensors={TEACHER_TOP_K_LOG_PROBS: _log(_TEACHER)})
    loss, _ = top_k_kl_loss(
        log_probs=student, batch=batch, response_mask=torch.ones(1, 1),
        config=TopKKLConfig(tail=tail),
    )  # fmt: skip
    loss.backward()
    assert student.grad is not None
    assert student.grad.flatten().tolist() == pytest.approx(expected, abs=1e-5)


def test_equal_distributions_have_zero_kl_and_a_full_top_k_needs_no_tail() -> None:
    same = top_k_kl_per_token(_log(_TEACHER), _log(_TEACHER), "bucket")
    assert float(same) == pytest.approx(0.0, abs=1e-6)
    # k = the whole (3-token) vocabulary: the bucket KL is the plain forward KL.
    t, s = [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]
    got = top_k_kl_per_token(_log(t), _log(s), "bucket")
    expected = sum(p * math.log(p / q) for p, q in zip(t, s, strict=True))
    assert float(got) == pytest.approx(expected, rel=1e-4)


def test_the_loss_averages_valid_tokens_and_its_gradient_moves_the_student_to_the_teacher() -> None:
    # Two rows of two positions; the last position of row 1 is masked (its teacher row is 0,
    # as the teacher ships it, and must change nothing, NaN included).
    teacher = torch.log(torch.tensor([[[0.6, 0.3], [0.5, 0.1]], [[0.9, 0.05], [1.0, 1.0]]]))
    teacher[1, 1] = 0.0
    student = torch.log(torch.tensor([[[0.2, 0.4], [0.5, 0.1]], [[0.3, 0.3], [0.5, 0.2]]]))
    student.requires_grad_(True)
    mask = torch.tensor([[1, 1], [1, 0]])
    batch = Batch.from_dict(tensors={TEACHER_TOP_K_LOG_PROBS: teacher})
    loss, metrics = top_k_kl_loss(
        log_probs=student, batch=batch, response_mask=mask, config=TopKKLConfig()
    )
    per_token = top_k_kl_per_token(teacher, student.detach(), "bucket")
    assert float(loss.detach()) == pytest.approx(float(per_token[mask.bool()].mean()), rel=1e-5)
    assert float(per_token[0, 1]) == pytest.approx(0.0, abs=1e-6)  # equal at that position
    assert metrics["teacher_mass"] == pytest.approx((0.9 + 0.6 + 0.95) / 3, rel=1e-5)
    loss.backward()
    assert student.grad is not None and torch.isfinite(student.grad).all()
    assert torch.equal(student.grad[1, 1], torch.zeros(2))
    # Raising the log-prob of a token the teacher prefers more lowers the loss.
    assert student.grad[0, 0, 0] < 0 and student.grad[1, 0, 0] < 0


def test_objective_adds_the_term_only_with_top_k() -> None:
    plain = load_run_config("distill", None, _PATHS).algorithm
    assert distill_actor_objective(plain).token_terms == ()
    config = load_run_config(
        "distill",
        None,
        [*_PATHS, "algorithm.top_k=5", "algorithm.top_k_coef=0.5",
         "algorithm.top_k_tail=renormalize"],
    ).algorithm  # fmt: skip
    (term,) = distill_actor_objective(config).token_terms
    assert isinstance(term, hfsdk.TokenIdsLossTerm)
    assert (term.name, term.ids_key, term.coef) == ("top_k_kl", "teacher_top_k_ids", 0.5)
    assert term.fn is top_k_kl_loss and term.config == TopKKLConfig(tail="renormalize")


@pytest.mark.parametrize("setting", ["algorithm.top_k_coef=5", "algorithm.top_k_tail=renormalize"])
def test_top_k_settings_without_top_k_are_refused(setting: str) -> None:
    # Before: accepted and ignored (the objective reads them only with top_k > 0).
    name = setting.split("=")[0].removeprefix("algorithm.")
    with pytest.raises(hfsdk.ConfigError, match=rf"{name}=.* with algorithm\.top_k=0") as caught:
        load_run_config("distill", None, [*_PATHS, setting])
    assert "\n" not in str(caught.value)


def test_bad_tail_is_refused_in_one_line() -> None:
    with pytest.raises(hfsdk.ConfigError, match="top_k_tail"):
        load_run_config("distill", None, [*_PATHS, "algorithm.top_k_tail=drop"])


@pytest.mark.slow
@pytest.mark.heavy
def test_a_megatron_teacher_refuses_top_k_in_one_line(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from hfsdk.core.cli.main import main

    args = ["teacher.backend=megatron", "algorithm.top_k=4", "trainer.total_steps=1"]
    with pytest.raises(SystemExit) as exited:
        main(["run", "--algo", "distill", "--quiet", "--run-dir", f"{tmp_path}/run", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code != 0
    assert "the megatron backend does not compute a teacher's top-k log-probs" in err[-1]
    assert "(teacher.backend: fsdp) or set algorithm.top_k: 0" in err[-1]


def test_top_k_from_a_teacher_with_more_vocabulary_rows_is_refused(tmp_path: Any) -> None:
    """A teacher padded wider than the student names top-k ids the student has no row for (the
    update failed with an index error after the models were built); top_k 0 needs no match."""
    import json
    from pathlib import Path

    policy = Path(hfsdk.default_task_assets().model_dir)
    config = json.loads((policy / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "vocab_size": 64}))
    teacher = [f"teacher.model_path={tmp_path}", f"actor.model_path={policy}"]
    load_run_config("distill", None, teacher)
    with pytest.raises(hfsdk.ConfigError, match=r"teacher's vocabulary has 64 rows and the stud"):
        load_run_config("distill", None, [*teacher, "algorithm.top_k=4"])


def test_top_k_larger_than_the_vocabulary_is_refused(tmp_path: Any) -> None:
    """Before: accepted; the teacher's worker failed in its top-k after loading and
    generating."""
    import json
    from pathlib import Path

    policy = Path(hfsdk.default_task_assets().model_dir)
    rows = json.loads((policy / "config.json").read_text())["vocab_size"]
    paths = [f"teacher.model_path={policy}", f"actor.model_path={policy}"]
    load_run_config("distill", None, [*paths, f"algorithm.top_k={rows}"])  # the whole vocabulary
    with pytest.raises(
        hfsdk.ConfigError, match=rf"algorithm\.top_k={rows + 1} .*smallest vocabulary.*{rows} rows"
    ) as caught:
        load_run_config("distill", None, [*paths, f"algorithm.top_k={rows + 1}"])
    assert "\n" not in str(caught.value)
