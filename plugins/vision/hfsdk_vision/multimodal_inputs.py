"""Per-row multimodal inputs: token types, M-RoPE positions and image slices of a batch.

A batch keeps the patches of all its images in one ``pixel_values`` tensor and one
``image_grid_thw`` row per image (the layout transformers' Qwen2-VL takes), with
``images_per_row`` saying how many belong to each sequence. Selecting or repeating rows
must move the matching patch and grid rows along, which :func:`select_rows` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def mm_token_type_ids(input_ids: torch.Tensor, image_token_id: int) -> torch.Tensor:
    """1 where a token is an image token, else 0 (Qwen2-VL's ``mm_token_type_ids``)."""
    return (input_ids == image_token_id).int()


def mrope_position_ids(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    image_grid_thw: torch.Tensor,
    image_token_id: int,
) -> torch.Tensor:
    """(4, B, L) positions: the plain text positions (for the attention mask) over the model's
    3-D multimodal rotary positions, computed from the tokens and image grids of each row.

    Left padding is skipped: a row's first real token is at position 0, as in generation.
    Passing them explicitly keeps a forward independent of the ``rope_deltas`` a previous
    ``generate`` left on the model.
    """
    import torch

    text = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    if image_grid_thw.shape[0] == 0:  # no image in these rows: the three streams are the text's
        return text[None].expand(4, -1, -1)
    vision, _ = transformers_model(model).model.get_rope_index(
        input_ids,
        mm_token_type_ids=mm_token_type_ids(input_ids, image_token_id),
        image_grid_thw=image_grid_thw,
        attention_mask=attention_mask,
    )
    return torch.cat([text[None].to(vision.device), vision], dim=0)


def vision_token_ids(config: object) -> list[int]:
    """The ids a response must never hold: the image and video pads and the vision span
    markers. A sampled pad token would be an image slot with no image (the next forward's
    feature scatter fails or shifts other rows' features), so generation suppresses them and the
    recomputed log-probs renormalise without them, keeping both the same distribution."""
    names = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    return sorted({int(getattr(config, name)) for name in names if getattr(config, name, None)})


def patch_counts(image_grid_thw: torch.Tensor) -> list[int]:
    """Patches (rows of ``pixel_values``) of each image: ``t·h·w``."""
    return [int(n) for n in image_grid_thw.prod(dim=-1).tolist()]


def select_rows(
    pixel_values: torch.Tensor,
    image_grid_thw: torch.Tensor,
    images_per_row: torch.Tensor,
    rows: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(pixel_values, image_grid_thw, images_per_row)`` of ``rows`` (repeats allowed, in
    the given order): the images of each chosen row with their patches."""
    import torch

    per_image = patch_counts(image_grid_thw)
    image_start = [0, *torch.cumsum(images_per_row, 0).tolist()]
    patch_start = [0, *torch.cumsum(torch.tensor(per_image, dtype=torch.long), 0).tolist()]
    pixels, grids, counts = [], [], []
    for row in rows:
        first, last = image_start[row], image_start[row + 1]
        pixels.append(pixel_values[patch_start[first] : patch_start[last]])
        grids.append(image_grid_thw[first:last])
        counts.append(last - first)
    return (
        torch.cat(pixels) if pixels else pixel_values[:0],
        torch.cat(grids) if grids else image_grid_thw[:0],
        torch.tensor(counts, dtype=torch.long),
    )


def transformers_model(model: Any) -> Any:
    """``model``, or the transformers model inside it when it is peft's LoRA wrapper (a LoRA
    actor's module; peft comes with the fsdp backend, which this plugin does not import)."""
    unwrap = getattr(model, "get_base_model", None)
    return unwrap() if callable(unwrap) else model
