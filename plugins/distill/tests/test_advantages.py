"""The ``reverse_kl`` estimator against hand computations."""

from __future__ import annotations

import pytest
import torch

import hfsdk
from hfsdk_distill.advantages import compute_reverse_kl_advantages


def _inputs() -> dict[str, torch.Tensor]:
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]])
    teacher = torch.tensor(
        [[-1.0, -2.0, -9.0], [-0.5, -0.5, -0.5], [-3.0, 7.0, 7.0], [0.0, -1.0, 5.0]]
    )
    student = torch.tensor(
        [[-2.0, -1.0, -9.0], [-0.5, -1.5, -0.1], [-1.0, 1.0, 1.0], [-1.0, -1.0, 2.0]]
    )
    scores = torch.zeros(4, 3)
    scores[0, 1], scores[1, 2], scores[2, 0], scores[3, 1] = 1.0, 0.0, 1.0, 1.0
    return {"response_mask": mask, "teacher_log_probs": teacher, "student_log_probs": student,
            "token_level_rewards": scores}  # fmt: skip


def test_pure_distillation_is_teacher_minus_student_on_valid_tokens() -> None:
    x = _inputs()
    result = compute_reverse_kl_advantages(**x, distill_coef=0.5)
    expected = torch.tensor([[0.5, -0.5, 0.0], [0.0, 0.5, -0.2], [-1.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    assert torch.allclose(result.advantages, expected)
    assert torch.equal(result.returns, result.advantages)
    # Reverse-KL samples (student − teacher), 0 where masked.
    assert result.extras["reverse_kl"][1].tolist() == pytest.approx([0.0, -1.0, 0.4])
    assert result.extras["reverse_kl"][2, 1] == 0.0


def test_reward_is_mixed_in_centred_on_the_group_mean() -> None:
    x = _inputs()
    # Groups: rows 0,1 (scores 1, 0: mean 0.5) and rows 2,3 (scores 1, 1: mean 1).
    result = compute_reverse_kl_advantages(
        **x, group_index=["a", "a", "b", "b"], distill_coef=1.0, reward_weight=2.0
    )
    gap = (x["teacher_log_probs"] - x["student_log_probs"]) * x["response_mask"]
    centred = torch.tensor([0.5, -0.5, 0.0, 0.0])
    expected = (gap + 2.0 * centred[:, None]) * x["response_mask"]
    assert torch.allclose(result.advantages, expected)


def test_groups_of_one_are_centred_on_the_batch_mean() -> None:
    x = _inputs()
    result = compute_reverse_kl_advantages(
        **x, group_index=[0, 1, 2, 3], distill_coef=0.0, reward_weight=1.0
    )
    # Scores 1, 0, 1, 1: batch mean 0.75.
    centred = torch.tensor([0.25, -0.75, 0.25, 0.25])
    assert torch.allclose(result.advantages, centred[:, None] * x["response_mask"])


def test_missing_teacher_log_probs_is_one_clear_error() -> None:
    x = _inputs()
    del x["teacher_log_probs"]
    with pytest.raises(hfsdk.HfsdkError, match="teacher_log_probs and student_log_probs"):
        compute_reverse_kl_advantages(**x)


def test_registered_by_name() -> None:
    entry = hfsdk.get_registry("advantage_estimators")["reverse_kl"]
    assert entry.impl is compute_reverse_kl_advantages
    assert entry.plugin == "distill"
