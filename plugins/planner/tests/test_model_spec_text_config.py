"""A vision-language model's HF config keeps the decoder's keys under ``text_config``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk import HfsdkError
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
    assert spec.num_params == llama_param_count(
        num_layers=2,
        hidden_size=64,
        num_heads=2,
        num_kv_heads=2,
        intermediate_size=128,
        vocab_size=22,
        tie_word_embeddings=False,
    )
    assert spec.name == tmp_path.name


def test_the_top_levels_tying_and_name_win() -> None:
    tied = ModelSpec.from_hf_config({**QWEN2_VL, "tie_word_embeddings": True})
    untied = ModelSpec.from_hf_config(QWEN2_VL)
    assert untied.num_params - tied.num_params == 22 * 64
    assert untied.name == "qwen2_vl"


def test_a_config_with_neither_still_names_the_missing_keys() -> None:
    with pytest.raises(HfsdkError, match="HF config lacks num_hidden_layers"):
        ModelSpec.from_hf_config({"model_type": "x", "text_config": {"hidden_size": 8}})
