"""The processor: each image pad becomes as many tokens as the image has vision features."""

from __future__ import annotations

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_vision.model import TinyVLMSpec
from hfsdk_vision.tokens import expand_placeholders

from .images import noise_image


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


def test_placeholders_and_images_out_of_step_are_refused(vlm) -> None:
    _, processor = vlm
    with pytest.raises(HfsdkError, match="2 image placeholders but 1 images"):
        processor([expand_placeholders("<image> <image> red")], [[noise_image(0)]])


def test_a_saved_processor_reloads_with_the_same_ids(vlm, vlm_dir) -> None:
    from hfsdk_vision.processor import VisionProcessor

    _, processor = vlm
    again = VisionProcessor.from_pretrained(vlm_dir)
    texts, images = [expand_placeholders("<image> what colour is the square ?")], [[noise_image(4)]]
    a, b = processor(texts, images), again(texts, images)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_prompts_are_left_padded_whatever_the_tokenizers_padding_side(vlm_dir) -> None:
    from hfsdk_vision.processor import VisionProcessor

    # transformers' default when tokenizer_config.json has no padding_side
    processor = VisionProcessor.from_pretrained(vlm_dir)
    processor.tokenizer.padding_side = "right"
    enc = processor(
        [expand_placeholders("<image> what colour is the square ?"), expand_placeholders("red")],
        [[noise_image(0)], []],
    )
    assert enc["attention_mask"][:, -1].tolist() == [1, 1]
    assert enc["attention_mask"][1, 0] == 0
