"""The HF ↔ megatron converter: bit-exact round trips for every supported layout and head."""

from __future__ import annotations

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_megatron import convert
from hfsdk_backend_megatron.arch import shape_from_config


def _config(family: str, tied: bool) -> dict:
    return {
        "architectures": ["Qwen2ForCausalLM" if family == "qwen2" else "LlamaForCausalLM"],
        "vocab_size": 27,
        "hidden_size": 16,
        "intermediate_size": 24,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "tie_word_embeddings": tied,
    }


def _hf_state(shape: convert.ModelShape, head: str) -> dict[str, torch.Tensor]:
    h, d, kv = shape.hidden_size, shape.head_dim, shape.num_kv_heads
    state = {"model.embed_tokens.weight": torch.randn(shape.vocab_size, h)}
    for i in range(shape.num_layers):
        p = f"model.layers.{i}."
        state.update(
            {
                p + "self_attn.q_proj.weight": torch.randn(shape.num_heads * d, h),
                p + "self_attn.k_proj.weight": torch.randn(kv * d, h),
                p + "self_attn.v_proj.weight": torch.randn(kv * d, h),
                p + "self_attn.o_proj.weight": torch.randn(h, shape.num_heads * d),
                p + "mlp.gate_proj.weight": torch.randn(shape.ffn_hidden_size, h),
                p + "mlp.up_proj.weight": torch.randn(shape.ffn_hidden_size, h),
                p + "mlp.down_proj.weight": torch.randn(h, shape.ffn_hidden_size),
                p + "input_layernorm.weight": torch.randn(h),
                p + "post_attention_layernorm.weight": torch.randn(h),
            }
        )
        if shape.qkv_bias:
            for name, rows in (("q", shape.num_heads * d), ("k", kv * d), ("v", kv * d)):
                state[p + f"self_attn.{name}_proj.bias"] = torch.randn(rows)
    state["model.norm.weight"] = torch.randn(h)
    if head == "lm" and not shape.tie_embeddings:
        state["lm_head.weight"] = torch.randn(shape.vocab_size, h)
    if head == "value":
        state["score.weight"], state["score.bias"] = torch.randn(1, h), torch.randn(1)
    return state


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("head", ["lm", "value"])
@pytest.mark.parametrize(("tp", "pp"), [(1, 1), (2, 1), (2, 2), (2, 4)])
def test_round_trip_is_bit_exact(family: str, tied: bool, head: str, tp: int, pp: int) -> None:
    shape = shape_from_config(_config(family, tied))
    assert shape.qkv_bias == (family == "qwen2")
    hf = _hf_state(shape, head)
    shards = {
        (p, t): convert.to_megatron(hf, shape, tp=tp, tp_rank=t, pp=pp, pp_rank=p, head=head)
        for p in range(pp)
        for t in range(tp)
    }
    back = convert.to_hf(shards, shape, tp=tp, pp=pp, head=head)
    assert back.keys() == hf.keys()
    for name, value in hf.items():
        assert torch.equal(back[name], value), name


def test_fused_qkv_groups_query_heads_with_their_kv_head() -> None:
    """Rank r holds kv groups [r·G/tp, (r+1)·G/tp), each as [its q heads, k, v]."""
    shape = shape_from_config(_config("llama", False))
    hf = _hf_state(shape, "lm")
    d, per = shape.head_dim, shape.heads_per_group  # 2, 4
    rank1 = convert.to_megatron(hf, shape, tp=2, tp_rank=1, pp=1, pp_rank=0)
    qkv = rank1["decoder.layers.0.self_attention.linear_qkv.weight"]
    q = hf["model.layers.0.self_attn.q_proj.weight"]
    k = hf["model.layers.0.self_attn.k_proj.weight"]
    assert qkv.shape[0] == (per + 2) * d  # one group per rank (2 kv heads, tp=2)
    assert torch.equal(qkv[: per * d], q[per * d : 2 * per * d])  # group 1's query heads
    assert torch.equal(qkv[per * d : (per + 1) * d], k[d : 2 * d])  # then its key head
    fc1 = rank1["decoder.layers.0.mlp.linear_fc1.weight"]
    gate = hf["model.layers.0.mlp.gate_proj.weight"]
    assert torch.equal(fc1[:12], gate[12:])  # [gate slice; up slice]
    # vocabulary 27 padded to 28: rank 1 holds rows 14..27, the last one zero padding
    embed = rank1["embedding.word_embeddings.weight"]
    assert embed.shape == (14, shape.hidden_size) and embed[-1].eq(0).all()
    assert torch.equal(embed[:13], hf["model.embed_tokens.weight"][14:])
    rank1_pp = convert.to_megatron(hf, shape, tp=2, tp_rank=1, pp=2, pp_rank=1)
    out = rank1_pp["output_layer.weight"]
    assert out.shape[0] == 14 and out[-1].eq(0).all()
    assert "embedding.word_embeddings.weight" not in rank1_pp
    assert "decoder.layers.1.mlp.linear_fc2.weight" in rank1_pp  # layers 2, 3 renumbered


def test_unknown_architecture_is_refused() -> None:
    with pytest.raises(HfsdkError, match="does not know"):
        shape_from_config({"architectures": ["MistralForCausalLM"], "model_type": "mistral"})


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        # transformers 5 writes rope scaling as rope_parameters (it was trained as plain RoPE)
        ({"rope_parameters": {"rope_type": "linear", "factor": 4.0}}, "rope scaling"),
        ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "rope scaling"),
        ({"attention_bias": True}, "attention_bias"),  # o_proj's bias was dropped
        ({"mlp_bias": True}, "mlp_bias"),
        ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ],
)
def test_settings_the_converter_would_drop_are_refused(extra: dict, named: str) -> None:
    with pytest.raises(HfsdkError, match=f"uses {named}.*use backend: fsdp"):
        shape_from_config({**_config("llama", False), **extra})
    plain = {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}, "hidden_act": "silu"}
    assert shape_from_config({**_config("llama", False), **plain}).rope_theta == 5e5


def test_score_head_drops_a_value_bias(caplog: pytest.LogCaptureFixture) -> None:
    """A token-classification directory (score.weight + score.bias) loaded as a scorer."""
    shape = shape_from_config(_config("llama", False))
    hf = _hf_state(shape, "value")
    with caplog.at_level("WARNING", logger=convert.__name__):
        out = convert.to_megatron(hf, shape, tp=2, tp_rank=0, pp=1, pp_rank=0, head="score")
    assert torch.equal(out["output_layer.weight"], hf["score.weight"])
    assert "output_layer.bias" not in out  # the score head has no bias
    assert "score.bias is ignored" in caplog.text
    value = convert.to_megatron(hf, shape, tp=1, tp_rank=0, pp=1, pp_rank=0, head="value")
    assert torch.equal(value["output_layer.bias"], hf["score.bias"])


@pytest.mark.parametrize(
    "extra",
    [
        # transformers 4 writes no layer_types: layers from max_window_layers on slide
        {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 0},
        {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 2},
        # transformers 5 writes each layer's kind
        {"use_sliding_window": True, "sliding_window": 3, "layer_types": ["sliding_attention"] * 4},
        {
            "use_sliding_window": True,
            "sliding_window": 3,
            "layer_types": ["full_attention", "sliding_attention"] * 2,
        },
    ],
)
def test_qwen2_sliding_window_attention_is_refused(extra: dict) -> None:
    """megatron runs full causal attention: positions past the window differed from HF."""
    with pytest.raises(HfsdkError, match=r"uses sliding-window attention.*use backend: fsdp"):
        shape_from_config({**_config("qwen2", False), **extra})


@pytest.mark.parametrize(
    "extra",
    [
        # Qwen2.5's config.json (transformers 4): the window is set but off
        {"use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 28},
        # the same saved by transformers 5: every layer full attention
        {
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": 28,
            "layer_types": ["full_attention"] * 4,
        },
        # on, but only from layer 28 of 4: no layer slides
        {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 28},
    ],
)
def test_qwen2_full_attention_configs_still_convert(extra: dict) -> None:
    assert shape_from_config({**_config("qwen2", False), **extra}).family == "qwen2"
