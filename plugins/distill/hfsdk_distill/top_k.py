"""The top-k logit KL of distillation: forward KL to the teacher over its top-k tokens.

The teacher ships, for every response position the student sampled, its k most
likely tokens and their log-probs (not the full vocabulary). The student's
log-probs of the same ids are gathered in its training forward pass (a
``hfsdk.TokenIdsLossTerm``), and per valid position::

    KL_t = Σ_j p_T(j) · (log p_T(j) − log p_S(j))

over a support built from the k ids. What happens to the rest of the
vocabulary (the tail) is ``tail``:

- ``bucket``: the tail is one more outcome, with mass ``1 − Σ_k p`` under
  each model; the KL is between two distributions over k + 1 outcomes, a
  lower bound of the full-vocabulary forward KL (merging outcomes never raises
  a KL) that equals it when the tail is empty; a student that moves mass
  into the tail is penalised.
- ``renormalize``: both models' k log-probs are renormalised to sum to one
  over the k ids; only the shape of the distribution inside the top-k counts.

Per-token values are aggregated like every other loss term (``aggregation``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import attrs

from hfsdk import HfsdkError

if TYPE_CHECKING:
    import torch

    from hfsdk import Batch, LossAggregation

TopKTail = Literal["bucket", "renormalize"]
TOP_K_TAILS: tuple[str, ...] = ("bucket", "renormalize")
TEACHER_TOP_K_LOG_PROBS = "teacher_top_k_log_probs"
"""Batch column (B, R, k): the teacher's top-k log-probs per response position."""
TEACHER_TOP_K_IDS = "teacher_top_k_ids"
"""Batch column (B, R, k): their token ids (the ids the student's log-probs are gathered at)."""
# The largest log of a top-k mass that still leaves a tail: below float32's resolution near 1,
# a tail this small is as good as empty and its log stays finite.
_MAX_LOG_MASS = -1e-6


@attrs.frozen(kw_only=True)
class TopKKLConfig:
    """How the top-k KL treats the vocabulary outside the teacher's top-k."""

    tail: TopKTail = attrs.field(default="bucket", validator=attrs.validators.in_(TOP_K_TAILS))


def _with_tail(log_probs: torch.Tensor) -> torch.Tensor:
    """``(..., k)`` log-probs plus the log of the remaining mass as outcome k + 1."""
    import torch

    log_mass = torch.logsumexp(log_probs, dim=-1, keepdim=True).clamp(max=_MAX_LOG_MASS)
    return torch.cat([log_probs, torch.log(-torch.expm1(log_mass))], dim=-1)


def _renormalized(log_probs: torch.Tensor) -> torch.Tensor:
    import torch

    return log_probs - torch.logsumexp(log_probs, dim=-1, keepdim=True)


def top_k_kl_per_token(
    teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor, tail: TopKTail = "bucket"
) -> torch.Tensor:
    """``KL(teacher ‖ student)`` per position ``(...)`` over the top-k support (module doc).

    Both inputs are ``(..., k)`` log-probs of the same token ids; the teacher's
    are treated as constants.
    """
    if teacher_log_probs.shape != student_log_probs.shape:
        raise HfsdkError(
            f"top-k KL: teacher log-probs {tuple(teacher_log_probs.shape)} and student "
            f"log-probs {tuple(student_log_probs.shape)} differ; both are (B, R, k) at the "
            "teacher's top-k ids"
        )
    shape = _with_tail if tail == "bucket" else _renormalized
    teacher = shape(teacher_log_probs.detach().float())
    student = shape(student_log_probs.float())
    return (teacher.exp() * (teacher - student)).sum(dim=-1)


def top_k_kl_loss(
    *,
    log_probs: torch.Tensor,
    batch: Batch,
    response_mask: torch.Tensor,
    aggregation: LossAggregation | None = None,
    config: TopKKLConfig | None = None,
    **unused: Any,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The ``top_k_kl`` actor loss term: ``log_probs`` are the student's at the teacher's ids.

    Metrics (per-token means over this part): ``teacher_mass``, the teacher's
    top-k probability mass, and ``student_mass``, the student's on the same ids.
    """
    from hfsdk import aggregate_loss, masked_fill_zero

    config = config or TopKKLConfig()
    if TEACHER_TOP_K_LOG_PROBS not in batch:
        raise HfsdkError(
            f"the top_k_kl loss needs the teacher's top-k log-probs ({TEACHER_TOP_K_LOG_PROBS}) "
            "in the training batch; the distill program adds them when algorithm.top_k > 0"
        )
    teacher = batch[TEACHER_TOP_K_LOG_PROBS].to(log_probs.device)
    mask = response_mask.bool()
    # Masked positions carry zeros from the teacher: make them a harmless valid input so
    # no NaN reaches the gradient through the mask.
    teacher = teacher.masked_fill(~mask.unsqueeze(-1), -1e4)
    per_token = top_k_kl_per_token(teacher, log_probs, config.tail)
    loss = aggregate_loss(per_token, response_mask, aggregation)
    with_tokens = mask.sum().clamp(min=1)
    metrics = {
        "teacher_mass": float(masked_fill_zero(teacher.exp().sum(-1), mask).sum() / with_tokens),
        "student_mass": float(
            masked_fill_zero(log_probs.detach().exp().sum(-1), mask).sum() / with_tokens
        ),
    }
    return loss, metrics
