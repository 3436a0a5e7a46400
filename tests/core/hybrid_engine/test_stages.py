"""Which layers a generation pipeline stage decodes and who is first/last."""

from __future__ import annotations

from hfsdk.core.hybrid_engine.layout import GenLayout, TrainLayout, generation_pp_groups
from hfsdk.core.hybrid_engine.stages import StageLink


def test_single_stage_decodes_every_layer() -> None:
    link = StageLink.single()
    assert (link.stage, link.count, link.first, link.last) == (0, 1, True, True)
    assert link.layers(6) == range(0, 6)


def test_stages_split_the_layers_in_pipeline_group_order() -> None:
    # (p=2, t=2) -> (pg=2, tg=1): each pipeline group is one tensor rank of both stages.
    groups = generation_pp_groups(TrainLayout(2, 2, 1), GenLayout(2, 1, 2))
    assert groups == [(0, 2), (1, 3)]
    first, last = (StageLink(ranks=groups[1], rank=r) for r in groups[1])
    assert (first.stage, first.first, first.last, first.layers(6)) == (0, True, False, range(3))
    assert (last.stage, last.first, last.last, last.layers(6)) == (1, False, True, range(3, 6))
