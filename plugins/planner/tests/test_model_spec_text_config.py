"""A vision-language model's HF config keeps the decoder's keys under ``text_config``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk_planner.flops import body_params
from hfsdk_planner.model_spec import ModelSpec, llama_param_count, resolve_model

TEXT = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 22,
}
QWEN2_VL = {
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "model_type": "qwen2_vl",
    "text_config": {**TEXT, "model_type": "qwen2_vl_text"},
    "tie_word_embeddings": False,
    "vision_config": {"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2},
}


def test_a_vision_language_model_dir_is_priced_by_its_text_model(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN2_VL))
    spec = resolve_model(str(tmp_path))
    assert (spec.num_layers, spec.hidden_size, spec.num_heads) == (2, 64, 2)
    assert (spec.intermediate_size, spec.vocab_size) == (128, 22)
    # Untied at the top level: an LM head of its own (the Llama count leaves out biases).
    assert spec.text_params == llama_param_count(
        num_layers=2,
        hidden_size=64,
        num_heads=2,
        num_kv_heads=2,
        intermediate_size=128,
        vocab_size=22,
        tie_word_embeddings=False,
    )
    assert spec.vision_params > 0 and spec.num_params == spec.text_params + spec.vision_params
    assert spec.name == tmp_path.name


def test_the_top_levels_tying_and_name_win() -> None:
    tied = ModelSpec.from_hf_config({**QWEN2_VL, "tie_word_embeddings": True})
    untied = ModelSpec.from_hf_config(QWEN2_VL)
    assert untied.num_params - tied.num_params == 22 * 64
    assert untied.name == "qwen2_vl"


def test_a_config_with_neither_still_names_the_missing_keys() -> None:
    with pytest.raises(HfsdkError, match="HF config lacks num_hidden_layers"):
        ModelSpec.from_hf_config({"model_type": "x", "text_config": {"hidden_size": 8}})


QWEN2_VL_2B = {
    "model_type": "qwen2_vl",
    "tie_word_embeddings": True,
    "text_config": {"num_hidden_layers": 28, "hidden_size": 1536, "num_attention_heads": 12,
                    "num_key_value_heads": 2, "intermediate_size": 8960, "vocab_size": 151936},
    "vision_config": {"depth": 32, "embed_dim": 1280, "hidden_size": 1536, "num_heads": 16,
                      "mlp_ratio": 4, "patch_size": 14, "spatial_merge_size": 2,
                      "temporal_patch_size": 2, "in_channels": 3},
}  # fmt: skip


# Parameters of Qwen2VLForConditionalGeneration built from each config on the meta device
# (transformers 5.19; its Qwen2 decoder's qkv biases are the only parameters not counted).
@pytest.mark.parametrize(
    ("config", "built"),
    [
        ({**QWEN2_VL, "vision_config": {**QWEN2_VL["vision_config"], "depth": 2}}, 173_312),
        (QWEN2_VL_2B, 2_208_985_600),
    ],
)
def test_a_vision_language_models_count_includes_its_vision_tower(config: dict, built: int) -> None:
    # The tower trains with the decoder, so its state takes memory: leaving it out missed
    # 0.665B of Qwen2-VL-2B's 2.209B parameters (about 10.6 GB of training state).
    spec = resolve_model(config)
    assert abs(spec.num_params - built) <= 0.01 * built, (spec.num_params, built)
    # FLOPs stay on the decoder: its count is the text model's alone.
    text_only = ModelSpec.from_hf_config({**config, "vision_config": None})
    assert spec.text_params == text_only.num_params < spec.num_params
    assert body_params(spec) == body_params(text_only)
