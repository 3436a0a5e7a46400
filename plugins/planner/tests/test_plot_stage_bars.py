"""``hfsdk plot``'s stage bars: never taller than the step they break down.

The rows are the timings a GRPO and a PPO run logged (rounded): the log-prob and
value passes run concurrently, each timing spanning the whole block, and
``timing/generation_s`` includes ``timing/reshard_s``.
"""

from __future__ import annotations

import math

import pytest

from hfsdk_planner.run_plan import measured_stages
from hfsdk_planner.run_plot import bar_segments, stage_times

GRPO_ROWS = [
    {
        "step": 1,
        "timing/advantages_s": 0.0006,
        "timing/data_s": 0.0005,
        "timing/generation_s": 0.8915,
        "timing/old_log_prob_s": 1.0634,
        "timing/ref_log_prob_s": 1.0634,
        "timing/reshard_s": 0.0002,
        "timing/reward_s": 0.0077,
        "timing/step_s": 3.0178,
        "timing/update_actor_s": 1.0537,
    },
    {
        "step": 2,
        "timing/advantages_s": 0.0004,
        "timing/data_s": 0.0004,
        "timing/generation_s": 0.2126,
        "timing/old_log_prob_s": 0.8499,
        "timing/ref_log_prob_s": 0.8499,
        "timing/reshard_s": 0.0003,
        "timing/reward_s": 0.0007,
        "timing/step_s": 1.1099,
        "timing/update_actor_s": 0.0455,
    },
]
PPO_ROWS = [
    {
        "step": 1,
        "timing/advantages_s": 0.0129,
        "timing/data_s": 0.0006,
        "timing/generation_s": 0.6392,
        "timing/old_log_prob_s": 0.3468,
        "timing/ref_log_prob_s": 0.3469,
        "timing/reshard_s": 0.3,
        "timing/reward_s": 0.0006,
        "timing/step_s": 6.3458,
        "timing/update_actor_s": 1.8799,
        "timing/update_critic_s": 3.4451,
        "timing/values_s": 0.3469,
    },
    # A step that skipped the old log-probs (an exactly on-policy update).
    {
        "step": 2,
        "timing/generation_s": 0.6,
        "timing/ref_log_prob_s": 0.3,
        "timing/reshard_s": 0.1,
        "timing/values_s": 0.2,
        "timing/update_actor_s": 1.0,
        "timing/update_critic_s": 2.0,
        "timing/step_s": 4.0,
    },
]


def _bar_tops(rows: list[dict[str, float]], with_other: bool) -> list[float]:
    pieces = [p for p in bar_segments(rows) if with_other or p.name != "other"]
    return [max(p.bottoms[i] + p.heights[i] for p in pieces) for i in range(len(rows))]


@pytest.mark.parametrize("rows", [GRPO_ROWS, PPO_ROWS], ids=["grpo", "ppo"])
def test_stage_bars_are_never_taller_than_the_step(rows: list[dict[str, float]]) -> None:
    for row, top in zip(rows, _bar_tops(rows, with_other=False), strict=True):
        assert top <= row["timing/step_s"] + 1e-9
    # With the rest of the step on top, the bar is exactly the step.
    steps = [row["timing/step_s"] for row in rows]
    assert _bar_tops(rows, with_other=True) == pytest.approx(steps)


@pytest.mark.parametrize("rows", [GRPO_ROWS, PPO_ROWS], ids=["grpo", "ppo"])
def test_stacked_stages_follow_the_planners_measured_stages(
    rows: list[dict[str, float]],
) -> None:
    # The bar stands as high as run_plan.measured_stages' stages (reward: a function).
    for row, top in zip(rows, _bar_tops(rows, with_other=False), strict=True):
        assert top == pytest.approx(math.fsum(measured_stages(row, ("reward",)).values()))


def test_generation_excludes_the_resharding_it_includes() -> None:
    stages = stage_times(PPO_ROWS)
    assert stages["generation"] == pytest.approx([0.6392 - 0.3, 0.5])
    assert stages["reshard"] == pytest.approx([0.3, 0.1])


def test_concurrent_passes_stand_side_by_side_from_one_height() -> None:
    pieces = {p.name: p for p in bar_segments(PPO_ROWS)}
    passes = [pieces[name] for name in ("old_log_prob", "ref_log_prob", "values")]
    assert len({tuple(p.bottoms) for p in passes}) == 1
    assert sum(p.width for p in passes) == pytest.approx(1.0)
    assert len({p.offset for p in passes}) == 3
    assert passes[0].heights == [0.3468, 0.0]  # skipped in step 2


def test_other_is_the_step_less_the_concurrent_block_counted_once() -> None:
    other = stage_times(GRPO_ROWS)["other"]
    covered = [0.8913 + 0.0002 + 1.0634 + 0.0077 + 0.0006 + 1.0537, 0.2123 + 0.0003 + 0.8499]
    covered[1] += 0.0007 + 0.0004 + 0.0455
    assert other == pytest.approx([3.0178 - covered[0], 1.1099 - covered[1]])
