"""Text and images into model inputs: transformers' Qwen2-VL image processor plus the tokenizer.

``Qwen2VLProcessor`` cannot be built in this environment (its video half needs torchvision,
which the CPU torch here cannot have), so this class does the processor's one text job
itself: each ``<|image_pad|>`` in the text becomes as many pad tokens as the image has
vision features, ``t·h·w / merge_size²`` from the image processor's ``image_grid_thw``.
The pixels go through transformers' own ``Qwen2VLImageProcessorPil`` (resize, normalise,
patchify); :meth:`save_pretrained` writes both halves' files into one directory (whether
``Qwen2VLProcessor`` loads that directory where torchvision exists is not tested here).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfsdk import HfsdkError
from hfsdk_vision.tokens import IMAGE_PAD

if TYPE_CHECKING:
    import torch
    from PIL.Image import Image
    from transformers import PreTrainedTokenizerFast


class VisionProcessor:
    """A Qwen2-VL-style processor: ``image_processor`` for pixels, ``tokenizer`` for text."""

    def __init__(self, image_processor: Any, tokenizer: PreTrainedTokenizerFast) -> None:
        self.image_processor = image_processor
        self.tokenizer = tokenizer
        self.image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_PAD)

    @property
    def merge_size(self) -> int:
        """Patches merged along each side into one vision feature."""
        return int(self.image_processor.merge_size)

    @property
    def patch_dim(self) -> int:
        """Values per patch in ``pixel_values``' last dimension: channels · t · patch²."""
        ip = self.image_processor
        # The normalisation has one mean per channel: its length is the channel count.
        channels = len(ip.image_mean)
        return channels * int(ip.temporal_patch_size) * int(ip.patch_size) ** 2

    def encode_images(self, images: Sequence[Image]) -> dict[str, torch.Tensor]:
        """``pixel_values`` (patches of all images, concatenated) and ``image_grid_thw`` (N, 3)."""
        out = self.image_processor(images=list(images), return_tensors="pt")
        return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}

    def expand_text(self, text: str, grids: torch.Tensor) -> str:
        """``text`` with its i-th ``<|image_pad|>`` repeated as often as image i has features."""
        parts = text.split(IMAGE_PAD)
        if len(parts) - 1 != len(grids):
            raise HfsdkError(
                f"the text has {len(parts) - 1} image placeholders but {len(grids)} images "
                "were given; pass one image per '<image>' in the prompt"
            )
        counts = [int(g.prod()) // self.merge_size**2 for g in grids]
        pieces = [parts[0]]
        for count, rest in zip(counts, parts[1:], strict=True):
            pieces.append(IMAGE_PAD * count + rest)
        return "".join(pieces)

    def __call__(
        self, texts: Sequence[str], images: Sequence[Sequence[Image]], *, padding: bool = True
    ) -> dict[str, torch.Tensor]:
        """Model inputs for ``texts[i]`` with its images ``images[i]`` (left-padded), plus
        ``images_per_row`` (B,): how many of ``image_grid_thw``'s rows belong to each text."""

        if len(texts) != len(images):
            raise HfsdkError(
                f"got {len(texts)} texts but {len(images)} image lists; pass one list per text"
            )
        vision = self.encode_image_rows(images)
        expanded, first = [], 0
        for text, row in zip(texts, images, strict=True):
            grids = vision["image_grid_thw"][first : first + len(row)]
            expanded.append(self.expand_text(text, grids))
            first += len(row)
        # Always left-pad, whatever the tokenizer's own padding_side (transformers defaults to
        # right): generation appends after the last column, so right padding changes responses.
        encoded = self.tokenizer(
            expanded, return_tensors="pt", padding=padding, padding_side="left"
        )
        return {
            "input_ids": encoded["input_ids"],
            "attention_mask": encoded["attention_mask"],
            **vision,
        }

    def encode_image_rows(self, images: Sequence[Sequence[Image]]) -> dict[str, torch.Tensor]:
        """:meth:`encode_images` of every row's images at once, plus ``images_per_row`` (B,);
        rows without any image give empty ``pixel_values`` (0 patches of :attr:`patch_dim`
        values, so they concatenate with other ranks' patches) and ``image_grid_thw``."""
        import torch

        flat = [image for row in images for image in row]
        vision = (
            self.encode_images(flat)
            if flat
            else {
                "pixel_values": torch.zeros(0, self.patch_dim),
                "image_grid_thw": torch.zeros(0, 3, dtype=torch.long),
            }
        )
        counts = torch.tensor([len(row) for row in images], dtype=torch.long)
        return {**vision, "images_per_row": counts}

    def save_pretrained(self, directory: str | Path) -> None:
        """Save the image processor and the tokenizer into ``directory``."""
        self.image_processor.save_pretrained(str(directory))
        self.tokenizer.save_pretrained(str(directory))

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> VisionProcessor:
        """Load what :meth:`save_pretrained` wrote; the tokenizer as the fast tokenizer it was
        saved as (never re-guessed: a guessed tokenizer class can change token ids)."""
        from transformers import PreTrainedTokenizerFast
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil,
        )

        return cls(
            Qwen2VLImageProcessorPil.from_pretrained(str(directory)),
            PreTrainedTokenizerFast.from_pretrained(str(directory)),
        )
