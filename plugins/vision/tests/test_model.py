"""The tiny Qwen2-VL: built locally, saved, reloaded, token ids and feature counts agree."""

from __future__ import annotations

import pytest
import torch

from hfsdk_vision.model import TinyVLMSpec, load_tiny_vlm, save_tiny_vlm
from hfsdk_vision.shapes import tokenizer_corpus
from hfsdk_vision.tokens import IMAGE_PAD, VISION_END, VISION_START, expand_placeholders

from .images import noise_image


def test_config_token_ids_are_the_tokenizers(vlm) -> None:
    model, processor = vlm
    tok = processor.tokenizer
    assert model.config.image_token_id == tok.convert_tokens_to_ids(IMAGE_PAD)
    assert model.config.vision_start_token_id == tok.convert_tokens_to_ids(VISION_START)
    assert model.config.vision_end_token_id == tok.convert_tokens_to_ids(VISION_END)
    assert tok.unk_token_id not in tok(f"{VISION_START}{IMAGE_PAD}{VISION_END} red")["input_ids"]
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"


def test_processor_expands_each_image_to_its_feature_count(vlm) -> None:
    model, processor = vlm
    spec = TinyVLMSpec()
    wide = noise_image(1, 40, 90)  # resized keeping its aspect: another grid than the square
    enc = processor(
        [expand_placeholders("<image> what colour"), expand_placeholders("<image> <image> red")],
        [[noise_image(0)], [wide, noise_image(2)]],
    )
    grids = enc["image_grid_thw"]
    assert grids[0].tolist() == [1, 4, 4] and grids[1].tolist() != [1, 4, 4]
    pads = (enc["input_ids"] == processor.image_token_id).sum(-1).tolist()
    merged = (grids.prod(-1) // spec.merge_size**2).tolist()
    assert pads == [merged[0], merged[1] + merged[2]]
    assert pads[0] == spec.features_per_image
    assert enc["pixel_values"].shape[0] == int(grids.prod(-1).sum())
    assert enc["attention_mask"][0, 0] == 0  # left padding for the shorter prompt
    ipr = enc.pop("images_per_row")
    assert ipr.tolist() == [1, 2]
    with torch.no_grad():
        out = model(**enc, mm_token_type_ids=(enc["input_ids"] == processor.image_token_id).int())
    assert out.logits.shape == (*enc["input_ids"].shape, len(processor.tokenizer))


def test_a_rebuild_is_identical_and_reloads(tmp_path, vlm) -> None:
    model, _ = vlm
    again, processor = load_tiny_vlm(save_tiny_vlm(tmp_path, tokenizer_corpus(), TinyVLMSpec()))
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert len(processor.tokenizer) == model.config.text_config.vocab_size


def test_a_spec_whose_rope_sections_do_not_fit_is_refused() -> None:
    with pytest.raises(ValueError, match="mrope_section"):
        TinyVLMSpec(mrope_section=(4, 4, 4))
