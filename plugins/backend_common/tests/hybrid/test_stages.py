"""Which layers a generation pipeline stage decodes, who is first/last, wrong shards."""

from __future__ import annotations

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_common.hybrid.layout import GenLayout, TrainLayout, generation_pp_groups
from hfsdk_backend_common.hybrid.stages import StageLink


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


def test_a_shard_from_another_stage_is_a_one_line_error() -> None:
    shape = DecoderShape(
        num_layers=4, hidden_size=8, num_heads=2, num_kv_heads=2, head_dim=4, vocab_size=16
    )
    # Stage 0's weights (embedding, layers 0-1) handed to stage 1 of 2 (layers 2-3).
    shard = {"embedding.word_embeddings.weight": torch.zeros(16, 8)}
    shard |= {f"decoder.layers.{i}.input_layernorm.weight": torch.ones(8) for i in (0, 1)}
    with pytest.raises(HfsdkError, match=r"stage 1 of 2 decodes layers 2\.\.3") as info:
        TPDecoder(shard, shape, tg=1, tp_rank=0, stages=StageLink(ranks=(0, 1), rank=1))
    assert "\n" not in str(info.value)
