"""Log-probs of responses to image prompts, with the same multimodal inputs generation used.

The sequence is a left-padded prompt (with its image tokens) followed by a right-padded
response. The forward gets the images' ``pixel_values`` and ``image_grid_thw`` and explicit
multimodal rotary positions (:func:`mrope_position_ids`), so the recomputed log-probs of the
actor, the reference and the old policy equal the sampler's; the image-token invariant is
checked before every forward. Vision tokens are excluded from the response distribution,
as generation excludes them (:func:`hfsdk_vision.multimodal_inputs.vision_token_ids`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfsdk_vision.invariant import check_image_tokens
from hfsdk_vision.multimodal_inputs import mrope_position_ids, vision_token_ids

if TYPE_CHECKING:
    import torch


def response_log_probs(
    model: torch.nn.Module,
    *,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    pixel_values: torch.Tensor,
    image_grid_thw: torch.Tensor,
    images_per_row: torch.Tensor,
    response_width: int,
    temperature: float = 1.0,
) -> torch.Tensor:
    """(B, R) log-probs of the last ``response_width`` tokens of each row given everything
    before them (0 where ``attention_mask`` is 0). Gradients flow when called with them on."""
    import torch

    config = model.config
    merge = config.vision_config.spatial_merge_size
    check_image_tokens(
        input_ids,
        image_grid_thw,
        images_per_row,
        image_token_id=config.image_token_id,
        merge_size=merge,
        attention_mask=attention_mask,
    )
    positions = mrope_position_ids(
        model, input_ids, attention_mask, image_grid_thw, config.image_token_id
    )
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=positions,
        # Rows without images (a text-only micro-batch): the tower must not run on nothing.
        pixel_values=pixel_values if len(image_grid_thw) else None,
        image_grid_thw=image_grid_thw if len(image_grid_thw) else None,
        use_cache=False,
        logits_to_keep=response_width + 1,
    )
    # logits[:, i] predicts token i + 1: the kept R + 1 positions' first R predict the response.
    logits = out.logits[:, :-1].float() / temperature
    # The sampler never emits vision tokens (generation suppresses them): same distribution.
    logits[..., vision_token_ids(config)] = float("-inf")
    responses = input_ids[:, -response_width:]
    chosen = logits.gather(-1, responses[..., None])[..., 0]
    log_probs = chosen - torch.logsumexp(logits, dim=-1)
    return log_probs * attention_mask[:, -response_width:]
