"""Layout maths of the 3D-HybridEngine: validation, rank places, groups."""

from __future__ import annotations

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.hybrid.accounting import transition_bytes, uniform_transition_bytes
from hfsdk_backend_common.hybrid.layout import (
    GenLayout,
    HeadShape,
    TrainLayout,
    generation_layout,
    generation_pp_groups,
    generation_tp_groups,
    micro_dp_groups,
    place,
    validate,
)
from hfsdk_backend_common.hybrid.llama_format import (
    LlamaShape,
    grouped_qkv,
    llama_specs,
    split_grouped_qkv,
    tp_slice,
)

HEADS = HeadShape(num_layers=8, num_heads=8, num_kv_heads=4)


def test_rank_order_is_megatron_tp_dp_pp() -> None:
    train = TrainLayout(2, 2, 2)
    assert [train.coords(r) for r in range(4)] == [(0, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 1)]
    assert all(train.rank(*train.coords(r)) == r for r in range(train.world))


def test_micro_dp_groups_follow_the_paper_grouping() -> None:
    # t=4 -> tg=2, dg=2: micro-DP groups are consecutive tensor ranks, generation TP
    # groups take one member of each (HybridFlow Fig. 8: [G1,G3], [G2,G4]).
    train = TrainLayout(1, 4, 2)
    gen = generation_layout(train, tp=2)
    assert gen == GenLayout(1, 2, 2)
    assert micro_dp_groups(train, gen) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert generation_tp_groups(train, gen) == [(0, 2), (1, 3), (4, 6), (5, 7)]
    # (2, 4, 1) -> (1, 2, 4, 1): a group spans both stages and two tensor ranks.
    train = TrainLayout(2, 4, 1)
    gen = generation_layout(train, tp=2)
    pl = place(train, gen, 5)  # stage 1, tensor rank 1
    assert pl.group == (0, 1, 4, 5) and pl.k == 3 and (pl.gen_stage, pl.gen_tp) == (0, 0)
    assert sorted(r for g in micro_dp_groups(train, gen) for r in g) == list(range(8))
    assert generation_pp_groups(train, gen) == [(r,) for r in range(8)]


def test_each_generation_shard_contains_the_training_shard() -> None:
    train = TrainLayout(2, 4, 1)
    gen = generation_layout(train, tp=2, pp=1)
    for rank in range(8):
        pl = place(train, gen, rank)
        # Generation tensor rank jg covers training tensor ranks jg*b .. jg*b+b-1.
        assert pl.gen_tp * 2 <= pl.tp < pl.gen_tp * 2 + 2
        assert pl.gen_stage == 0  # pg = 1 covers every stage


@pytest.mark.parametrize(
    ("train", "tp", "pp", "match"),
    [
        (TrainLayout(1, 4, 1), 3, 1, "does not divide training layout"),
        (TrainLayout(1, 4, 1), 8, 1, "does not divide training layout"),
        (TrainLayout(2, 2, 1), 4, 1, "tg must divide t"),
        (TrainLayout(1, 8, 1), 8, 1, "key/value heads"),
    ],
)
def test_bad_rollout_layouts_are_one_line_errors_naming_both(train, tp, pp, match) -> None:
    with pytest.raises(HfsdkError, match=match) as info:
        validate(train, generation_layout(train, tp=tp, pp=pp), HEADS)
    message = str(info.value)
    assert "\n" not in message
    assert str(train) in message or "training layout" in message
    assert "pp=" in message or "generation layout" in message


def test_grouped_qkv_resplits_per_head_group() -> None:
    # Slicing the grouped (megatron) QKV for tg ranks gives each rank whole kv groups:
    # its q heads are exactly the heads that attend to its k/v heads.
    shape = LlamaShape(
        vocab_size=8, hidden_size=16, intermediate_size=8, num_layers=1, num_heads=8, num_kv_heads=2
    )
    hd = shape.head_dim
    q, k, v = torch.randn(8 * hd, 16), torch.randn(2 * hd, 16), torch.randn(2 * hd, 16)
    spec = next(s for s in llama_specs(shape) if "linear_qkv" in s.name)
    fused = grouped_qkv(q, k, v, num_kv_heads=2)
    for jg in range(2):
        rq, rk, rv = split_grouped_qkv(tp_slice(fused, spec, 2, jg), num_heads=4, num_kv_heads=1)
        assert torch.equal(rq, q.chunk(2)[jg])
        assert torch.equal(rk, k.chunk(2)[jg]) and torch.equal(rv, v.chunk(2)[jg])


def test_uniform_formula_matches_the_exact_one_up_to_the_norms() -> None:
    shape = LlamaShape(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_layers=8,
        num_heads=8,
        num_kv_heads=4,
    )
    specs = llama_specs(shape)
    train = TrainLayout(2, 4, 1)
    gen = generation_layout(train, tp=2)
    # Rank 0 holds the embedding, rank 4 (stage 1) the output layer: equal sizes here.
    exact = transition_bytes(specs, train, gen, 0, 8, element_size=2)
    uniform = uniform_transition_bytes(shape.num_params(), train, gen, element_size=2)
    assert exact.minimum == pytest.approx(uniform, rel=0.02)
    assert exact.received == pytest.approx(uniform, rel=0.02)


def test_generation_shard_in_hf_names_is_each_ranks_slice() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from hfsdk_backend_common.hybrid.llama_format import (
        hf_llama_shape,
        hf_llama_to_megatron,
        megatron_to_hf_local,
    )

    config = LlamaConfig(
        vocab_size=32, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    shape = hf_llama_shape(config)
    full = hf_llama_to_megatron(model.state_dict(), shape)
    specs = llama_specs(shape)
    hf_state = model.state_dict()
    for rank in range(2):
        shard = {s.name: tp_slice(full[s.name], s, 2, rank) for s in specs}
        local = dict(megatron_to_hf_local(shard, shape, 2))
        assert sorted(local) == sorted(hf_state)
        for name, tensor in local.items():
            reference = hf_state[name]
            if tensor.shape == reference.shape:  # norms are whole on every rank
                assert torch.equal(tensor, reference)
                continue
            dim = 0 if tensor.shape[1] == reference.shape[1] else 1
            assert torch.equal(tensor, reference.chunk(2, dim=dim)[rank]), name
