"""Row selection of flat image tensors, the suppressed vision ids, positions without images."""

from __future__ import annotations

import torch

from hfsdk_vision.multimodal_inputs import mrope_position_ids, select_rows, vision_token_ids


def test_select_rows_moves_each_rows_patches_and_grids() -> None:
    grids = torch.tensor([[1, 2, 2], [1, 2, 4], [1, 2, 2]])  # 4, 8 and 4 patches
    pixels = torch.arange(16, dtype=torch.float32)[:, None]
    per_row = torch.tensor([1, 0, 2])  # row 0: image 0; row 1: none; row 2: images 1 and 2
    got_pixels, got_grids, got_counts = select_rows(pixels, grids, per_row, [2, 0, 0, 1])
    assert got_counts.tolist() == [2, 1, 1, 0]
    assert got_grids.tolist() == [[1, 2, 4], [1, 2, 2], [1, 2, 2], [1, 2, 2]]
    expected = [*range(4, 16), *range(4), *range(4)]
    assert got_pixels[:, 0].tolist() == expected


def test_vision_token_ids_are_the_configs(vlm) -> None:
    model, processor = vlm
    tok = processor.tokenizer
    names = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")
    assert vision_token_ids(model.config) == sorted(tok.convert_tokens_to_ids(n) for n in names)


def test_rows_without_images_get_text_positions(vlm) -> None:
    model, _ = vlm
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    ids = torch.ones_like(mask)
    positions = mrope_position_ids(model, ids, mask, torch.zeros(0, 3, dtype=torch.long), 99)
    assert positions.shape == (4, 2, 5)
    assert positions[:, 0].tolist() == [[0, 0, 0, 1, 2]] * 4
    assert positions[:, 1].tolist() == [[0, 1, 2, 3, 4]] * 4
