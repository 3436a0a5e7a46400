"""``images``: what ``hfsdk data inspect`` says about image prompts (a prompt describer).

For a dataset whose rows carry images (verl's ``images`` column) it decodes every image (a
broken one is one line naming its row, as a run's preflight check would say) and reports how
many rows and images there are and what the first image prompt becomes once each ``<image>``
is replaced by its image tokens: the model directory's image processor decides how many.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hfsdk_vision.data import check_image_prompt, image_list, row_base
from hfsdk_vision.preflight import PREPROCESSOR_FILE, refuse_single_image_column
from hfsdk_vision.rollout import IMAGES, PROMPT_TEXT
from hfsdk_vision.tokens import expand_placeholders

NAME = "images"
"""The ``prompt_describers`` registry name of :func:`describe_images`."""


def describe_images(
    rows: Sequence[Mapping[str, Any]], tokenizer: Any, model_path: str | None
) -> list[str]:
    """Report lines on the rows' images; ``[]`` when no row has one."""
    if not any(IMAGES in row for row in rows):
        # A run's preflight refuses TRL's single 'image' column: say so here too.
        refuse_single_image_column(rows)
    with_images = [row for row in rows if row.get(IMAGES) is not None and len(row[IMAGES])]
    if not with_images:
        return []
    # Every row as a run's preflight checks it: a mismatch anywhere is the same one line.
    decoded = [
        check_image_prompt(
            str(row.get(PROMPT_TEXT, "")),
            image_list(row.get(IMAGES), f"row {row.get('uid', '?')}"),
            f"row {row.get('uid', '?')}",
            base=row_base(row),
        )
        for row in rows
    ]
    count = sum(len(images) for images in decoded)
    lines = [f"images:           {count} in {len(with_images)} of {len(rows)} rows (all decode)"]
    first, images = with_images[0], decoded[rows.index(with_images[0])]
    text = str(first.get(PROMPT_TEXT, ""))
    if model_path is None or not (Path(model_path) / PREPROCESSOR_FILE).is_file():
        lines.append(
            "image tokens:     unknown: the model directory has no image processor "
            f"({PREPROCESSOR_FILE}); set actor.model_path to a vision-language model"
        )
        return lines
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from hfsdk_vision.processor import VisionProcessor

    processor = VisionProcessor(Qwen2VLImageProcessorPil.from_pretrained(model_path), tokenizer)
    encoded = processor([expand_placeholders(text)], [images])
    image_tokens = int((encoded["input_ids"] == processor.image_token_id).sum())
    per_image = ", ".join(
        str(int(grid.prod()) // processor.merge_size**2) for grid in encoded["image_grid_thw"]
    )
    lines.append(
        f"image tokens:     first image prompt {image_tokens} ({per_image} per image), "
        f"{encoded['input_ids'].shape[1]} tokens in all once its images are expanded"
    )
    return lines
