"""Slice regions, the byte formula and ``actor.rollout_layout`` checks of the fsdp actor."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
import torch

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import ConfigError, HfsdkError
from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
from hfsdk_backend_common.hybrid.llama_format import (
    LlamaShape,
    grouped_qkv,
    hf_llama_to_megatron,
    llama_specs,
    tp_slice,
)
from hfsdk_backend_common.testing.launch import run_gloo
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig, run_config_problems
from hfsdk_backend_fsdp.tp_rollout import resolve_rollout_tp
from hfsdk_backend_fsdp.tp_slices import (
    expected_received_bytes,
    fsdp_rows,
    full_gather_bytes,
)

HERE = str(Path(__file__).parent)
SHAPE = LlamaShape(
    vocab_size=11, hidden_size=8, intermediate_size=12, num_layers=1, num_heads=4, num_kv_heads=2
)


def _hf_state() -> dict[str, torch.Tensor]:
    h, f, v, hd = 8, 12, 11, 2
    shapes = {
        "model.embed_tokens.weight": (v, h),
        "lm_head.weight": (v, h),
        "model.norm.weight": (h,),
        "model.layers.0.input_layernorm.weight": (h,),
        "model.layers.0.post_attention_layernorm.weight": (h,),
        "model.layers.0.self_attn.q_proj.weight": (4 * hd, h),
        "model.layers.0.self_attn.k_proj.weight": (2 * hd, h),
        "model.layers.0.self_attn.v_proj.weight": (2 * hd, h),
        "model.layers.0.self_attn.o_proj.weight": (h, 4 * hd),
        "model.layers.0.mlp.gate_proj.weight": (f, h),
        "model.layers.0.mlp.up_proj.weight": (f, h),
        "model.layers.0.mlp.down_proj.weight": (h, f),
    }
    torch.manual_seed(0)
    return {name: torch.randn(shape) for name, shape in shapes.items()}


def test_fsdp_rows_follow_torch_chunk() -> None:
    for rows in (1, 5, 11, 12):
        for world in (2, 3, 4):
            chunks = torch.arange(rows).chunk(world)
            for rank in range(world):
                start, stop = fsdp_rows(rows, world, rank)
                expected = chunks[rank].tolist() if rank < len(chunks) else []
                assert list(range(start, stop)) == expected


@pytest.mark.distributed
@pytest.mark.parametrize("world", [2, 4])
def test_exchanged_slices_equal_megatrons_tp_slice(world: int) -> None:
    # The real exchange (all-to-alls over gloo) from FSDP's dim-0 rows; fusing its q/k/v per
    # group and gate/up gives megatron's slice at tg=2.
    tg = 2
    state = _hf_state()
    full = hf_llama_to_megatron(state, SHAPE)
    specs = {s.name: s for s in llama_specs(attrs.evolve(SHAPE, vocab_size=12))}
    for name in ("embedding.word_embeddings.weight", "output_layer.weight"):
        full[name] = torch.cat([full[name], full[name].new_zeros(1, 8)])  # 11 -> 12 rows
    results = run_gloo(
        world, "slice_exchange_worker:run", {"state": state, "tg": tg}, path=[HERE], timeout=120
    )
    assert sorted({r["tp_rank"] for r in results}) == list(range(tg))
    for result in results:
        local, tp_rank = result["slices"], result["tp_rank"]
        qkv = full["decoder.layers.0.self_attention.linear_qkv.weight"]
        pre = "model.layers.0."
        fused = grouped_qkv(*(local[pre + f"self_attn.{x}_proj.weight"] for x in "qkv"), 1)
        assert torch.equal(fused, tp_slice(qkv, specs[
            "decoder.layers.0.self_attention.linear_qkv.weight"], tg, tp_rank))  # fmt: skip
        fc1 = torch.cat([local[pre + "mlp.gate_proj.weight"], local[pre + "mlp.up_proj.weight"]])
        name = "decoder.layers.0.mlp.linear_fc1.weight"
        assert torch.equal(fc1, tp_slice(full[name], specs[name], tg, tp_rank))
        for hf, mg in [
            (pre + "self_attn.o_proj.weight", "decoder.layers.0.self_attention.linear_proj.weight"),
            (pre + "mlp.down_proj.weight", "decoder.layers.0.mlp.linear_fc2.weight"),
            ("model.embed_tokens.weight", "embedding.word_embeddings.weight"),
            ("lm_head.weight", "output_layer.weight"),
            ("model.norm.weight", "decoder.final_layernorm.weight"),
        ]:
            assert torch.equal(local[hf], tp_slice(full[mg], specs[mg], tg, tp_rank)), hf


def test_formula_counts_what_is_not_already_held() -> None:
    shapes = {n: tuple(t.shape) for n, t in _hf_state().items()}
    # One rank, tg=1: nothing to receive; tg never receives more than a full gather.
    assert expected_received_bytes(shapes, 1, 1, 0, 4) == 0
    for world in (2, 4):
        for rank in range(world):
            sliced = expected_received_bytes(shapes, world, 2, rank, 4)
            assert 0 < sliced < full_gather_bytes(shapes, world, rank, 4)
    # tg = 1 on N ranks is exactly FSDP's all-gather.
    assert expected_received_bytes(shapes, 4, 1, 3, 2) == full_gather_bytes(shapes, 4, 3, 2)


# -- actor.rollout_layout before Ray ----------------------------------------------------


def _error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, overrides)
    return str(info.value)


def _config_dir(tmp_path: Path, **fields: Any) -> str:
    base = {
        "model_type": "llama",
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 64,
        "hidden_act": "silu",
    }
    (tmp_path / "config.json").write_text(json.dumps({**base, **fields}))
    return str(tmp_path)


def test_tp_must_divide_the_actor_ranks(model_dir: Path) -> None:
    message = _error(
        [f"actor.model_path={model_dir}", "actor.rollout_layout.tp=2",
         "placement.pools.global.devices=3"]
    )  # fmt: skip
    assert "actor.rollout_layout.tp=2 does not divide the fsdp actor's 3 ranks" in message


def test_tp_must_divide_heads_and_ffn(tmp_path: Path) -> None:
    # The default task's model has 4 heads: tp 3 does not divide them.
    message = _error(["actor.rollout_layout.tp=3", "placement.pools.global.devices=3"])
    assert "does not divide the model's 4 query heads and 4 key/value heads; choose" in message
    path = _config_dir(tmp_path, intermediate_size=66)
    message = _error(
        [f"actor.model_path={path}", "actor.rollout_layout.tp=4",
         "placement.pools.global.devices=4"]
    )  # fmt: skip
    # only what tp 4 does not divide is named first: the 2 key/value heads and the FFN width
    assert "does not divide the model's 2 key/value heads and FFN width 66; choose" in message


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"model_type": "qwen2"}, "decodes Llama models only, not model_type 'qwen2'"),
        ({"attention_bias": True}, "without biases"),
        ({"rope_parameters": {"rope_type": "llama3"}}, "not rope_type 'llama3'"),
    ],
)
def test_unsupported_models_are_refused(tmp_path: Path, fields: dict, expected: str) -> None:
    path = _config_dir(tmp_path, **fields)
    message = _error(
        [f"actor.model_path={path}", "actor.rollout_layout.tp=2",
         "placement.pools.global.devices=2"]
    )  # fmt: skip
    assert expected in message and "rollout_layout.tp: 1" in message


def test_decoder_setting_is_checked_against_the_model_and_layout(
    tmp_path: Path, model_dir: Path
) -> None:
    path = _config_dir(tmp_path, attention_bias=True)
    message = _error([f"actor.model_path={path}", "rollout.decoder=hfsdk"])
    assert "rollout.decoder=hfsdk decodes Llama models without biases" in message
    assert "set rollout.decoder: transformers for this model" in message
    # auto on the same model is accepted (it generates with transformers).
    load_run_config("grpo", None, [f"actor.model_path={path}"])
    message = _error(
        [f"actor.model_path={model_dir}", "actor.rollout_layout.tp=2",
         "placement.pools.global.devices=2", "rollout.decoder=transformers"]
    )  # fmt: skip
    assert "decodes with the hfsdk decoder, but rollout.decoder is transformers" in message


def test_generation_pipeline_stages_and_other_rollouts_are_refused(model_dir: Path) -> None:
    message = _error([f"actor.model_path={model_dir}", "actor.rollout_layout.pp=2"])
    assert "actor.rollout_layout.pp=2: the fsdp actor generates without pipeline" in message
    actor = FSDPRoleConfig(model_path=str(model_dir), rollout_layout=RolloutLayoutConfig(tp=2))
    other = SimpleNamespace(backend="vllm")
    problems = run_config_problems(SimpleNamespace(sections={"actor": actor, "rollout": other}))
    assert problems == [
        "actor.rollout_layout.tp=2 is served by the hf rollout backend only, not 'vllm'; set "
        "rollout.backend: hf or actor.rollout_layout.tp: 1"
    ]


def test_the_vllm_rollout_is_refused_by_its_real_config(model_dir: Path) -> None:
    """vLLM's config extends the hf one: an isinstance check let it through, and the run
    failed at step 2 (the actor's slices are not HF-named weights for vLLM to load)."""
    pytest.importorskip("hfsdk_rollout_vllm")
    message = _error(
        [f"actor.model_path={model_dir}", "actor.rollout_layout.tp=2",
         "placement.pools.global.devices=2", "rollout.backend=vllm"]
    )  # fmt: skip
    assert "actor.rollout_layout.tp=2 is served by the hf rollout backend only, not 'vllm'" in (
        message
    )


def test_a_fitting_layout_validates_and_resolves(model_dir: Path) -> None:
    overrides = [
        f"actor.model_path={model_dir}",
        "actor.rollout_layout.tp=2",
        "placement.pools.global.devices=2",
    ]
    assert load_run_config("grpo", None, overrides).actor.rollout_layout.tp == 2
    model = json.loads((model_dir / "config.json").read_text())
    assert resolve_rollout_tp(RolloutLayoutConfig(tp=2), 2, model) == 2
    assert resolve_rollout_tp(RolloutLayoutConfig(), 2, model) == 1
    # placement: auto's planned rollout tp is not applied to the fsdp actor.
    assert resolve_rollout_tp(RolloutLayoutConfig(planned_tp=2), 4, model) == 1
    with pytest.raises(HfsdkError, match="does not divide the fsdp actor's 3 ranks"):
        resolve_rollout_tp(RolloutLayoutConfig(tp=2), 3, model)
