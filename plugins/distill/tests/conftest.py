"""Fixtures of the distillation tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hfsdk import Batch
from hfsdk_testing import FakeRun


def _teacher_answers(run: FakeRun, role: str, value: float) -> None:
    """Role ``role`` answers ``value`` on every valid token (its calls still recorded)."""
    method = run.role(role).compute_ref_log_prob
    recorded = method.fn

    def answer(batch: Batch) -> Batch:
        recorded(batch)
        return Batch.from_dict(tensors={"ref_log_probs": value * batch["response_mask"].float()})

    method.fn = answer


@pytest.fixture
def teacher_answers() -> Callable[[FakeRun, str, float], None]:
    """``teacher_answers(run, role, value)``: a fake run's teacher role scores every valid
    token ``value``, its calls still recorded."""
    return _teacher_answers
