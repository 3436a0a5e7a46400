"""``actor.rollout_layout`` resolution: defaults, the planner's choice, one-line errors."""

from __future__ import annotations

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.hybrid.layout import GenLayout, HeadShape, TrainLayout
from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig, resolve_rollout_layout

HEADS = HeadShape(num_layers=4, num_heads=8, num_kv_heads=2)


def test_default_is_training_tp_without_pipeline() -> None:
    gen = resolve_rollout_layout(TrainLayout(2, 2, 1), RolloutLayoutConfig(), HEADS)
    assert gen == GenLayout(pg=1, tg=2, dg=2)
    gen = resolve_rollout_layout(TrainLayout(1, 2, 2), RolloutLayoutConfig(tp=1), HEADS)
    assert gen == GenLayout(pg=1, tg=1, dg=2)


def test_the_planners_choice_wins_when_it_fits() -> None:
    config = RolloutLayoutConfig(tp=2)
    assert resolve_rollout_layout(TrainLayout(1, 2, 1), config, HEADS, planned_tp=1) == GenLayout(
        1, 1, 2
    )
    # tg=4 does not divide t=2: the configured layout is used instead.
    assert resolve_rollout_layout(TrainLayout(1, 2, 1), config, HEADS, planned_tp=4) == GenLayout(
        1, 2, 1
    )


def test_bad_layouts_are_one_line_errors() -> None:
    with pytest.raises(HfsdkError, match=r"\(p=1, t=4, d=1\).*\(pg=1, tg=4, dg=1\).*key/value"):
        resolve_rollout_layout(TrainLayout(1, 4, 1), RolloutLayoutConfig(), HEADS)
    with pytest.raises(HfsdkError, match="rollout layout \\(pp=1, tp=3\\)"):
        resolve_rollout_layout(TrainLayout(1, 4, 1), RolloutLayoutConfig(tp=3), HEADS)
    with pytest.raises(HfsdkError, match=r"rollout_layout\.tp"):
        RolloutLayoutConfig(tp=0)
