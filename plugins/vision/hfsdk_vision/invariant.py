"""The invariant multimodal runs keep losing: image tokens in a row = vision features of its images.

A Qwen2-VL-style model scatters the vision tower's features into the positions of the image
pad tokens, in order, across the whole batch. If one row's prompt was truncated (its image
span cut), re-tokenised, or its images changed after tokenisation, the counts drift apart:
transformers then fails deep in ``masked_scatter`` for the whole batch, or — when the drift
cancels across rows — silently feeds one row's features to another. This check runs before
every multimodal forward and names the first row that breaks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfsdk import HfsdkError

if TYPE_CHECKING:
    import torch


def features_per_image(image_grid_thw: torch.Tensor, merge_size: int) -> list[int]:
    """Vision features the model makes of each image: ``t·h·w / merge_size²`` of its grid."""
    return [int(n) for n in (image_grid_thw.prod(dim=-1) // merge_size**2).tolist()]


def check_image_tokens(
    input_ids: torch.Tensor,
    image_grid_thw: torch.Tensor,
    images_per_row: torch.Tensor,
    *,
    image_token_id: int,
    merge_size: int,
    attention_mask: torch.Tensor | None = None,
) -> None:
    """Raise one :class:`hfsdk.HfsdkError` naming the first row whose image-token count differs
    from the feature count of its images (``image_grid_thw``'s rows, ``images_per_row[i]`` of
    them for row ``i``, in row order); ``attention_mask``: only unmasked tokens count."""
    rows = input_ids.shape[0]
    if images_per_row.shape[0] != rows:
        raise HfsdkError(
            f"images_per_row has {images_per_row.shape[0]} entries for {rows} rows; "
            "pass one image count per row"
        )
    total = int(images_per_row.sum())
    if total != image_grid_thw.shape[0]:
        raise HfsdkError(
            f"the rows hold {total} images (images_per_row) but image_grid_thw describes "
            f"{image_grid_thw.shape[0]}; keep one grid row per image, in row order"
        )
    is_image = input_ids == image_token_id
    if attention_mask is not None:
        is_image = is_image & attention_mask.bool()
    tokens = is_image.sum(dim=-1).tolist()
    features = features_per_image(image_grid_thw, merge_size)
    first = 0
    for row, (count, n_images) in enumerate(zip(tokens, images_per_row.tolist(), strict=True)):
        wanted = features[first : first + n_images]
        first += n_images
        if count != sum(wanted):
            grids = image_grid_thw[first - n_images : first].tolist()
            raise HfsdkError(
                f"row {row}: {count} image tokens in the sequence but its {n_images} image(s) "
                f"give {sum(wanted)} vision features (image_grid_thw {grids}, merge size "
                f"{merge_size}); the prompt's image span was cut or its images changed after "
                "tokenisation — keep whole image spans (raise the prompt length limit) and "
                "re-encode the row's images with the prompt"
            )
