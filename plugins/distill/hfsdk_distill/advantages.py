"""The ``reverse_kl`` advantage estimator of on-policy distillation.

The student sampled each response token; the teacher scored the same token.
Per valid token::

    A_t = c · (log π_T(y_t) − log π_S(y_t)) + w · (s_i − b_i)

- the first term is minus the per-token sample of the reverse KL
  KL(π_S ‖ π_T) = E_{y ~ π_S}[log π_S(y) − log π_T(y)]; a policy-gradient step
  on it lowers the reverse KL (no discounting: each token gets its own term,
  as in Agarwal et al., 2024 and Thinking Machines' on-policy distillation);
- the second mixes in a task reward: ``s_i`` the sequence's score,
  ``b_i`` the mean score of its group (the samples of the same prompt) when the
  group has more than one sample, else the batch mean.

``returns`` equal the advantages (no critic). Masked positions are 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch

from hfsdk import AdvantageResult, HfsdkError, check_token_tensors, masked_fill_zero


@attrs.frozen(kw_only=True)
class ReverseKLAdvantageConfig:
    """Settings of the ``reverse_kl`` estimator (the weights live in the ``algorithm`` section)."""


def _baselines(scores: torch.Tensor, group_index: Sequence[Any] | None) -> torch.Tensor:
    """Each sample's baseline: its group's mean score, or the batch mean for groups of one."""
    if scores.numel() == 0:
        return scores
    batch_mean = scores.mean()
    if group_index is None:
        return batch_mean.expand_as(scores).clone()
    groups: dict[Any, list[int]] = {}
    for row, key in enumerate(group_index):
        groups.setdefault(key, []).append(row)
    out = torch.empty_like(scores)
    for rows in groups.values():
        out[rows] = scores[rows].mean() if len(rows) > 1 else batch_mean
    return out


def compute_reverse_kl_advantages(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    teacher_log_probs: torch.Tensor | None = None,
    student_log_probs: torch.Tensor | None = None,
    group_index: Sequence[Any] | None = None,
    distill_coef: float = 1.0,
    reward_weight: float = 0.0,
    config: ReverseKLAdvantageConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """Teacher-minus-student log-probs per token, plus ``reward_weight`` × the centred score."""
    if teacher_log_probs is None or student_log_probs is None:
        raise HfsdkError(
            "advantage estimator 'reverse_kl' needs teacher_log_probs and student_log_probs "
            "(B, T): the teacher's and the sampling student's log-probs of the sampled tokens; "
            "the distill algorithm computes them"
        )
    check_token_tensors(
        response_mask,
        token_level_rewards=token_level_rewards,
        teacher_log_probs=teacher_log_probs,
        student_log_probs=student_log_probs,
    )
    with torch.no_grad():
        mask = response_mask
        gap = masked_fill_zero(teacher_log_probs.float() - student_log_probs.float(), mask)
        advantages = distill_coef * gap
        if reward_weight:
            scores = masked_fill_zero(token_level_rewards.float(), mask).sum(dim=-1)
            centred = scores - _baselines(scores, group_index)
            advantages = advantages + reward_weight * centred.unsqueeze(-1)
        advantages = masked_fill_zero(advantages, mask)
    return AdvantageResult(
        advantages=advantages, returns=advantages.clone(), extras={"reverse_kl": -gap}
    )
