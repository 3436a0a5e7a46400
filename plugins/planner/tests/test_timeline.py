"""The execution timeline: bar geometry and the drawn image."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from pathlib import Path

from hfsdk_planner import get_cluster, search_placement
from hfsdk_planner.timeline import draw_timeline, timeline_segments
from hfsdk_remax.spec import REMAX_SPEC
from hfsdk_safe_rlhf.spec import SAFE_RLHF_SPEC


def test_bars_fill_each_pool_within_its_stages() -> None:
    plan = search_placement(
        SAFE_RLHF_SPEC.dataflow, "70B", get_cluster("a100-80gb").with_devices(128)
    )
    assert len(plan.pools) > 1  # several lanes
    bars = timeline_segments(plan)
    starts = [sum(plan.stage_seconds[:i]) for i in range(len(plan.stages))]
    per_role: dict[str, float] = defaultdict(float)
    by_lane: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for pool, role, stage, start, seconds, _transition in bars:
        assert plan.role(role).pool == pool
        end = starts[stage] + plan.stage_seconds[stage]
        assert starts[stage] - 1e-9 <= start and start + seconds <= end + 1e-9
        per_role[role] += seconds
        by_lane[(pool, stage)].append((start, start + seconds))
    for role in plan.roles:
        assert math.isclose(per_role[role.role], sum(role.stage_seconds))
    for spans in by_lane.values():  # colocated roles run one after another
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end - 1e-9
    transitions = [bar for bar in bars if bar[5]]
    assert len(transitions) == 1 and transitions[0][1] == "actor"


def test_draws_a_png(tmp_path: Path) -> None:
    plan = search_placement(REMAX_SPEC.dataflow, "13B", get_cluster("a100-80gb").with_devices(16))
    out = draw_timeline(plan, tmp_path / "plan.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000
