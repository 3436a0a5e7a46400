"""``qwen2_vl_images``: how rows with images reach a Qwen2-VL-family forward in a backend.

A rollout batch carries each row's images as the per-row columns of
:mod:`hfsdk_vision.batch_images` and names this entry in ``meta[hfsdk.MODEL_INPUTS]``; a
training backend then asks :class:`Qwen2VLImages` for the forward's arguments of every
micro-batch: the rows' patches and grids in the model's flat layout and the multimodal rotary
positions, after the image-token invariant is checked. The backend knows nothing of images.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from hfsdk import ModelInputs
from hfsdk_vision.batch_images import IMAGE_KEYS, flat_images
from hfsdk_vision.invariant import check_image_tokens
from hfsdk_vision.multimodal_inputs import mrope_position_ids, vision_token_ids

if TYPE_CHECKING:
    import torch

    from hfsdk import Batch

NAME = "qwen2_vl_images"
"""The ``model_inputs`` registry name of :class:`Qwen2VLImages`."""


class Qwen2VLImages(ModelInputs):
    """Image patches, grids and M-RoPE positions of a Qwen2-VL-family model's rows."""

    columns: ClassVar[tuple[str, ...]] = IMAGE_KEYS

    def forward_kwargs(
        self, model: torch.nn.Module, micro: Batch, inputs: dict[str, Any]
    ) -> dict[str, Any]:
        """``inputs`` with the rows' ``pixel_values``/``image_grid_thw`` and (4, B, L)
        multimodal ``position_ids``; one error naming the row when the invariant breaks."""
        config = model.config
        input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
        pixel_values, grids, per_row = flat_images(micro)
        check_image_tokens(
            input_ids.cpu(),
            grids,
            per_row,
            image_token_id=config.image_token_id,
            merge_size=config.vision_config.spatial_merge_size,
            attention_mask=attention_mask.cpu(),
        )
        device = input_ids.device
        grids = grids.to(device)
        out = dict(inputs)
        out["position_ids"] = mrope_position_ids(
            model, input_ids, attention_mask, grids, config.image_token_id
        )
        if len(grids):  # rows without images: the tower must not run on nothing
            out["pixel_values"] = pixel_values.to(device)
            out["image_grid_thw"] = grids
        return out

    def suppressed_token_ids(self, model: torch.nn.Module) -> list[int]:
        """The vision tokens generation suppresses (:func:`vision_token_ids`)."""
        return vision_token_ids(model.config)
