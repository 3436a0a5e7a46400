"""Model sizes: named Llama shapes, parameter counts, HF configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk_planner.model_spec import ModelSpec, named_model, resolve_model


@pytest.mark.parametrize(
    ("size", "params"),
    [
        # Published parameter counts of Llama-2 7B/13B/70B and Code Llama 34B.
        ("7B", 6_738_415_616),
        ("13B", 13_015_864_320),
        ("34B", 33_743_970_304),
        ("70B", 68_976_648_192),
    ],
)
def test_named_sizes_have_the_standard_parameter_counts(size: str, params: int) -> None:
    assert named_model(size).num_params == params
    assert resolve_model(size.lower()).num_params == params


def test_kv_cache_per_token() -> None:
    # Llama-2-7B: 2 (K, V) x 32 layers x 4096 x 2 bytes = 512 KiB per token.
    assert named_model("7B").kv_bytes_per_token() == 512 * 1024
    # 70B uses 8 grouped KV heads of 128: 2 x 80 x 8 x 128 x 2 bytes.
    assert named_model("70B").kv_bytes_per_token() == 327_680


@pytest.mark.parametrize(("text", "params"), [("1.3B", 1.3e9), ("350M", 350e6), ("6.7e9", 6.7e9)])
def test_parameter_counts(text: str, params: float) -> None:
    spec = resolve_model(text)
    assert spec.num_params == int(params)
    # The derived shape is Llama-proportioned and roughly accounts for the count.
    shape_params = 12 * spec.num_layers * spec.hidden_size**2 + 2 * 32000 * spec.hidden_size
    assert 0.6 < shape_params / params < 1.5
    assert spec.hidden_size % spec.num_heads == 0
    assert resolve_model(params).num_params == int(params)


def _tiny_config() -> dict:
    return {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
        "tie_word_embeddings": True,
    }


def test_hf_config_dict_and_file(tmp_path: Path) -> None:
    config = _tiny_config()
    spec = resolve_model(config)
    # embeddings (tied) + 2 x (q, o: 64x64 each; k, v: 64x32 each; mlp 3x64x128; 2 norms) + norm
    per_layer = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    assert spec.num_params == 100 * 64 + 2 * per_layer + 64
    assert spec.num_kv_heads == 2
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(config))
    from_dir = resolve_model(str(tmp_path / "tiny"))
    assert from_dir.num_params == spec.num_params
    assert from_dir.name == "tiny"
    assert resolve_model(str(tmp_path / "tiny" / "config.json")).num_params == spec.num_params


def test_spec_passes_through() -> None:
    spec = named_model("13B")
    assert resolve_model(spec) is spec


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("13Q", "cannot understand model size '13Q'"),
        ("0.5k", "too small"),
        ({"hidden_size": 64}, "HF config lacks num_hidden_layers"),
        (True, "must be a size or parameter count"),
        ([7], "must be a string, number or HF config dict"),
        ("9B!", "cannot understand"),
    ],
)
def test_bad_sizes(value: object, message: str) -> None:
    with pytest.raises(HfsdkError, match=message):
        resolve_model(value)  # type: ignore[arg-type]


def test_bad_shapes() -> None:
    with pytest.raises(HfsdkError, match="not divisible by num_heads"):
        ModelSpec.from_shape(name="x", num_layers=2, hidden_size=100, num_heads=3,
                             num_kv_heads=3, intermediate_size=8, vocab_size=10)  # fmt: skip
    with pytest.raises(HfsdkError, match="num_layers must be a positive integer"):
        ModelSpec(name="x", num_params=1, num_layers=0, hidden_size=8, num_heads=1,
                  num_kv_heads=1, intermediate_size=8, vocab_size=8)  # fmt: skip


def test_bad_config_file(tmp_path: Path) -> None:
    broken = tmp_path / "config.json"
    broken.write_text("{not json")
    with pytest.raises(HfsdkError, match="cannot read HF config"):
        resolve_model(str(broken))


def _qwen3_0_6b_config() -> dict:
    """Qwen3-0.6B's shape: 16 heads of 128 on a hidden size of 1024 (head_dim set apart)."""
    return {
        "model_type": "qwen3",
        "hidden_size": 1024,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 3072,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    }


def test_hf_config_head_dim_sets_params_and_kv_cache() -> None:
    spec = resolve_model(_qwen3_0_6b_config())
    assert spec.head_dim == 128
    # q, o: 1024 x 16 x 128; k, v: 1024 x 8 x 128; SwiGLU 3 x 1024 x 3072; 2 norms.
    per_layer = 1024 * 128 * (2 * 16 + 2 * 8) + 3 * 1024 * 3072 + 2 * 1024
    assert spec.num_params == 28 * per_layer + 151936 * 1024 + 1024  # about 596M
    # 2 (K, V) x 28 layers x 8 KV heads x 128 x 2 bytes.
    assert spec.kv_bytes_per_token() == 2 * 28 * 8 * 128 * 2


def test_hf_config_head_dim_must_be_a_number() -> None:
    with pytest.raises(HfsdkError, match="head_dim must be a positive integer"):
        resolve_model({**_qwen3_0_6b_config(), "head_dim": "128"})


@pytest.mark.parametrize(
    "count", ["125M", "350M", "1.3B", "1.5B", "3B", "7e9", "8B", "13e9", "30B", "34e9", "70e9"]
)
def test_counts_get_shapes_that_tensor_and_pipeline_parallelism_divide(count: str) -> None:
    spec = resolve_model(count)
    # Heads in eights so tp 1, 2, 4 and 8 split them; layers in fours for p 2 and 4.
    assert spec.num_heads % 8 == 0 and spec.num_kv_heads % 8 == 0
    assert spec.hidden_size == 128 * spec.num_heads
    assert spec.num_layers % 4 == 0


def test_seventy_billion_as_a_count_is_shaped_like_llama_70b() -> None:
    spec, named = resolve_model("70e9"), named_model("70B")
    assert spec.num_params == 70_000_000_000
    # Grouped KV heads as in Llama-2-70B, so the KV cache is of the same size.
    assert spec.num_kv_heads == named.num_kv_heads == 8
    assert 0.8 < spec.kv_bytes_per_token() / named.kv_bytes_per_token() < 1.2
    assert resolve_model("7e9").num_layers == named_model("7B").num_layers


def test_seventy_billion_as_a_count_plans_on_128_gpus() -> None:
    from hfsdk_planner import plan_for_algorithm

    # Before: 71 heads x 70 layers, which no tensor or pipeline size divides: no layout fit.
    plan = plan_for_algorithm("ppo", model_size=70e9, num_devices=128, cluster="a100-80gb")
    assert {role.layout.t for role in plan.roles} <= {1, 2, 4, 8}
    assert plan.iteration_seconds > 0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_local_experts", 8),  # Mixtral
        ("num_experts", 128),  # Qwen3-MoE, Qwen2-MoE
        ("n_routed_experts", 64),  # DeepSeek-V2/V3
        ("moe_intermediate_size", 768),
    ],
)
def test_mixture_of_experts_configs_are_refused(tmp_path: Path, key: str, value: int) -> None:
    # A dense count would price Mixtral-8x7B (46.7B parameters) as 7.2B and plan it to fit.
    config = {**_qwen3_0_6b_config(), key: value, "num_experts_per_tok": 2}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HfsdkError, match=rf"MoE models are not priced yet.*{key}"):
        resolve_model(str(tmp_path))


def test_a_dense_config_with_zero_experts_is_priced() -> None:
    # Some dense configs carry the key switched off (Qwen2's num_experts: 0, null).
    for off in (0, None):
        spec = resolve_model({**_qwen3_0_6b_config(), "num_experts": off})
        assert spec.num_params == resolve_model(_qwen3_0_6b_config()).num_params


def test_gpt2_style_config_keys_are_read_as_their_llama_names() -> None:
    """GPT-2 / GPT-J name the shape n_layer, n_embd, n_head, n_inner; they are supported models."""
    gpt2 = {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_inner": None}
    spec = ModelSpec.from_hf_config({**gpt2, "n_positions": 1024, "vocab_size": 100})
    assert (spec.num_layers, spec.hidden_size, spec.num_heads) == (2, 64, 4)
    assert spec.num_kv_heads == 4
    # n_inner null means 4 x hidden, as GPT-2 itself reads it.
    assert spec.intermediate_size == 256
    gptj = ModelSpec.from_hf_config({**gpt2, "n_inner": 128, "vocab_size": 100})
    assert gptj.intermediate_size == 128
