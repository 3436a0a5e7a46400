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
from hfsdk_vision.multimodal_inputs import mrope_position_ids, transformers_model, vision_token_ids

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
        elif _is_sharded(model):
            # FSDP shards the tower's blocks as units whose all-gathers (and gradient
            # reduce-scatters) every rank must join, also when another rank's rows have images.
            _run_tower_in_next_forward(model)
        return out

    def suppressed_token_ids(self, model: torch.nn.Module) -> list[int]:
        """The vision tokens generation suppresses (:func:`vision_token_ids`)."""
        return vision_token_ids(model.config)


def _is_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model``'s parameters are FSDP2 shards (DTensors): a data-parallel forward."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def _run_tower_in_next_forward(model: torch.nn.Module) -> None:
    """Make the next forward of ``model`` run its vision tower on one blank image and add 0 ×
    its features to the text embeddings: the logits are unchanged and gradients reach every
    tower block, so the sharded tower's collectives match a rank whose rows have images."""
    import torch

    base = transformers_model(model).model
    vision = model.config.vision_config
    merge = vision.spatial_merge_size
    patch_dim = vision.in_channels * vision.temporal_patch_size * vision.patch_size**2
    stale = getattr(base, "_hfsdk_blank_tower", None)
    if stale is not None:  # a forward that failed before its hook ran
        stale.remove()

    def hook(_module: torch.nn.Module, args: Any, kwargs: dict[str, Any]) -> Any:
        handle.remove()
        base._hfsdk_blank_tower = None
        embeds = kwargs["inputs_embeds"]
        grid = torch.tensor([[1, merge, merge]], device=embeds.device)
        pixels = torch.zeros(merge * merge, patch_dim, device=embeds.device)
        features = base.get_image_features(pixels, grid, return_dict=True).pooler_output
        blank = torch.cat(features).sum().to(embeds.dtype)
        return args, {**kwargs, "inputs_embeds": embeds + 0 * blank}

    handle = base.language_model.register_forward_pre_hook(hook, with_kwargs=True)
    base._hfsdk_blank_tower = handle
