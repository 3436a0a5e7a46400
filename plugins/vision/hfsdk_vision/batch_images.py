"""Images as per-row columns of an :class:`hfsdk.Batch`, so rows can move with their images.

transformers' Qwen2-VL takes the patches of all images of a batch in one ``pixel_values``
tensor and one ``image_grid_thw`` row per image. A ``Batch`` holds per-row columns and is
chunked, indexed, repeated and padded by rows (dispatch to workers, ``n`` samples, dynamic
sampling, micro-batches), so here each row carries its own images, zero-padded to the
batch's widest row:

- ``pixel_values`` (B, max patches, patch dim): the row's patches, then zeros;
- ``image_grid_thw`` (B, max images, 3): the row's grids, then zero rows (0 patches);
- ``images_per_row`` (B,).

:func:`flat_images` turns any selection of such rows back into the model's layout. Two batches
concatenate only at the same widths (``Batch.concat`` needs equal per-row shapes), so a
rollout whose data-parallel ranks' outputs are concatenated pads every rank's columns to the
widest rank's, and its prompts to the widest rank's width (:func:`agreed_widths`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hfsdk_vision.log_probs import response_log_probs
from hfsdk_vision.multimodal_inputs import patch_counts

if TYPE_CHECKING:
    import torch

    from hfsdk import Batch
    from hfsdk_vision.generation import ImageRollout

IMAGE_KEYS = ("pixel_values", "image_grid_thw", "images_per_row")


def row_widths(image_grid_thw: torch.Tensor, images_per_row: torch.Tensor) -> tuple[int, int]:
    """(patches, images) of the widest row: the per-row columns' widths."""
    import torch

    patches = torch.tensor(patch_counts(image_grid_thw), dtype=torch.long)
    row_of = torch.repeat_interleave(torch.arange(len(images_per_row)), images_per_row)
    per_row = torch.zeros(len(images_per_row), dtype=torch.long).index_add_(0, row_of, patches)
    if not len(per_row):
        return 0, 0
    return int(per_row.max()), int(images_per_row.max())


def agreed_widths(widths: tuple[int, ...], group: Any) -> tuple[int, ...]:
    """The widest of every rank's ``widths`` over ``group`` (collective; ``None``: these)."""
    if group is None:
        return widths
    import torch
    import torch.distributed as dist

    widest = torch.tensor(widths, dtype=torch.long)
    dist.all_reduce(widest, op=dist.ReduceOp.MAX, group=group)
    return tuple(int(w) for w in widest)


def per_row_images(
    pixel_values: torch.Tensor,
    image_grid_thw: torch.Tensor,
    images_per_row: torch.Tensor,
    widths: tuple[int, int] = (0, 0),
) -> dict[str, torch.Tensor]:
    """The flat (model) layout as per-row, zero-padded columns (the module docstring's), at
    least ``widths`` (patches, images) wide."""
    import torch

    rows = images_per_row.shape[0]
    patches = patch_counts(image_grid_thw)
    image_start = [0, *torch.cumsum(images_per_row, 0).tolist()]
    patch_start = [0, *torch.cumsum(torch.tensor(patches, dtype=torch.long), 0).tolist()]
    row_patches = [
        patch_start[image_start[r + 1]] - patch_start[image_start[r]] for r in range(rows)
    ]
    width = max(max(row_patches, default=0), widths[0])
    most = max(int(images_per_row.max()) if rows else 0, widths[1])
    pixels = pixel_values.new_zeros(rows, width, pixel_values.shape[-1])
    grids = image_grid_thw.new_zeros(rows, most, 3)
    for r in range(rows):
        first, last = image_start[r], image_start[r + 1]
        pixels[r, : row_patches[r]] = pixel_values[patch_start[first] : patch_start[last]]
        grids[r, : last - first] = image_grid_thw[first:last]
    return {
        "pixel_values": pixels,
        "image_grid_thw": grids,
        "images_per_row": images_per_row.clone(),
    }


def flat_images(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(pixel_values, image_grid_thw, images_per_row)`` of ``batch``'s rows in the model's
    layout: each row's real images and patches, in row order, padding dropped."""
    import torch

    pixels, grids = [], []
    counts = batch["images_per_row"]
    for r in range(len(batch)):
        row_grids = batch["image_grid_thw"][r, : int(counts[r])]
        grids.append(row_grids)
        pixels.append(batch["pixel_values"][r, : sum(patch_counts(row_grids))])
    return torch.cat(pixels), torch.cat(grids), counts.clone()


def rollout_batch(rollout: ImageRollout, non_tensors: dict[str, Any] | None = None) -> Batch:
    """An :class:`hfsdk.Batch` of a rollout: sequences, responses, masks, the sampler's
    ``rollout_log_probs`` and the images as per-row columns; ``meta["temperature"]``."""
    from hfsdk import Batch

    tensors = {
        "input_ids": rollout.input_ids,
        "attention_mask": rollout.attention_mask,
        "responses": rollout.responses,
        "response_mask": rollout.response_mask,
        "rollout_log_probs": rollout.log_probs,
        **per_row_images(rollout.pixel_values, rollout.image_grid_thw, rollout.images_per_row),
    }
    return Batch.from_dict(
        tensors=tensors, non_tensors=non_tensors, meta={"temperature": rollout.temperature}
    )


def batch_log_probs(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """(B, R) response log-probs of a :func:`rollout_batch` (or any selection of its rows),
    the image-token invariant checked first."""
    pixel_values, grids, per_row = flat_images(batch)
    return response_log_probs(
        model,
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        pixel_values=pixel_values,
        image_grid_thw=grids,
        images_per_row=per_row,
        response_width=batch["responses"].shape[1],
        temperature=float(batch.meta.get("temperature", 1.0)),
    )
