"""The tiny Qwen2-VL: built locally, saved, reloaded, token ids and feature counts agree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from hfsdk_vision import model as model_module
from hfsdk_vision.model import TinyVLMSpec, ensure_tiny_vlm, load_tiny_vlm, save_tiny_vlm
from hfsdk_vision.shapes import tokenizer_corpus
from hfsdk_vision.tokens import IMAGE_PAD, VISION_END, VISION_START


def test_config_token_ids_are_the_tokenizers(vlm) -> None:
    model, processor = vlm
    tok = processor.tokenizer
    assert model.config.image_token_id == tok.convert_tokens_to_ids(IMAGE_PAD)
    assert model.config.vision_start_token_id == tok.convert_tokens_to_ids(VISION_START)
    assert model.config.vision_end_token_id == tok.convert_tokens_to_ids(VISION_END)
    assert tok.unk_token_id not in tok(f"{VISION_START}{IMAGE_PAD}{VISION_END} red")["input_ids"]
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"


def test_a_rebuild_is_identical_and_reloads(tmp_path, vlm) -> None:
    model, _ = vlm
    again, processor = load_tiny_vlm(save_tiny_vlm(tmp_path, tokenizer_corpus(), TinyVLMSpec()))
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert len(processor.tokenizer) == model.config.text_config.vocab_size


def test_a_spec_whose_rope_sections_do_not_fit_is_refused() -> None:
    with pytest.raises(ValueError, match="mrope_section"):
        TinyVLMSpec(mrope_section=(4, 4, 4))


def test_a_damaged_cached_model_is_rebuilt(
    tmp_path: Path, vlm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tokenizer_corpus()

    def save(directory: Path, corpus: object, spec: object) -> Path:  # the real build: copy it
        shutil.copytree(vlm_dir, directory, dirs_exist_ok=True)
        return directory

    monkeypatch.setattr(model_module, "save_tiny_vlm", save)
    built = ensure_tiny_vlm(corpus, cache_dir=tmp_path)
    (built / "model.safetensors").unlink()  # damaged after the build
    assert ensure_tiny_vlm(corpus, cache_dir=tmp_path) == built
    assert (built / "model.safetensors").is_file()
