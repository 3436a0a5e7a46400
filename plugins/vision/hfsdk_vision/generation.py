"""Sampling responses to image prompts with transformers' ``generate`` (``n`` per prompt).

The hfsdk decoder has no vision path, so image prompts are decoded by the model's own
``generate``, which builds the multimodal rotary positions and scatters the image features
itself. Each prompt's row, patches and grid are repeated ``n`` times (the tower encodes every
copy: sharing one encoding across the ``n`` samples is not done). The result carries the
sampler's own log-probs (from ``generate``'s scores: the sampling temperature, vision tokens
suppressed, no top-k/top-p), so a caller can compare them with a recomputed forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hfsdk_vision.invariant import check_image_tokens
from hfsdk_vision.multimodal_inputs import mm_token_type_ids, select_rows, vision_token_ids

if TYPE_CHECKING:
    import torch


@attrs.frozen(kw_only=True)
class ImageRollout:
    """``n`` sampled responses per prompt, rows ordered prompt by prompt.

    ``input_ids``/``attention_mask`` (B·n, P + R): the left-padded prompt then the response,
    right-padded; ``responses``/``response_mask`` (B·n, R): the response and its real tokens
    (up to and including the end-of-sequence token); ``pixel_values``, ``image_grid_thw`` and
    ``images_per_row`` are the repeated rows' images; ``log_probs`` (B·n, R) the sampler's.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    responses: torch.Tensor
    response_mask: torch.Tensor
    pixel_values: torch.Tensor
    image_grid_thw: torch.Tensor
    images_per_row: torch.Tensor
    log_probs: torch.Tensor
    temperature: float


def sample(
    model: torch.nn.Module,
    encoded: dict[str, torch.Tensor],
    *,
    n: int = 1,
    max_new_tokens: int = 8,
    temperature: float = 1.0,
    do_sample: bool = True,
    generator_seed: int | None = None,
) -> ImageRollout:
    """Sample ``n`` responses to each prompt of ``encoded`` (a :class:`VisionProcessor`
    output) with ``model.generate``; ``generator_seed`` seeds torch's global RNG around the call
    (restored afterwards)."""
    import torch

    config = model.config
    rows = [r for r in range(encoded["input_ids"].shape[0]) for _ in range(n)]
    pixel_values, grids, per_row = select_rows(
        encoded["pixel_values"], encoded["image_grid_thw"], encoded["images_per_row"], rows
    )
    input_ids = encoded["input_ids"][rows]
    attention_mask = encoded["attention_mask"][rows]
    check_image_tokens(
        input_ids,
        grids,
        per_row,
        image_token_id=config.image_token_id,
        merge_size=config.vision_config.spatial_merge_size,
        attention_mask=attention_mask,
    )
    eos = model.generation_config.eos_token_id
    pad = model.generation_config.pad_token_id
    with torch.random.fork_rng(enabled=generator_seed is not None):
        if generator_seed is not None:
            torch.manual_seed(generator_seed)
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                # A batch without images: the tower must not run on nothing.
                pixel_values=pixel_values if len(grids) else None,
                image_grid_thw=grids if len(grids) else None,
                mm_token_type_ids=mm_token_type_ids(input_ids, config.image_token_id),
                max_new_tokens=max_new_tokens,
                do_sample=do_sample,
                temperature=temperature if do_sample else None,
                top_k=0 if do_sample else None,
                top_p=1.0 if do_sample else None,
                eos_token_id=eos,
                pad_token_id=pad,
                suppress_tokens=vision_token_ids(config),
                return_dict_in_generate=True,
                output_scores=True,
            )
    responses = out.sequences[:, input_ids.shape[1] :]
    response_mask = _until_eos(responses, eos)
    # The scores are the sampling distribution's logits: temperature applied, vision
    # tokens suppressed (greedy: the raw logits with the suppression).
    logits = torch.stack(out.scores, dim=1).float()
    chosen = logits.gather(-1, responses[..., None])[..., 0]
    log_probs = (chosen - torch.logsumexp(logits, dim=-1)) * response_mask
    return ImageRollout(
        input_ids=out.sequences,
        attention_mask=torch.cat([attention_mask, response_mask], dim=1),
        responses=responses,
        response_mask=response_mask,
        pixel_values=pixel_values,
        image_grid_thw=grids,
        images_per_row=per_row,
        log_probs=log_probs,
        temperature=temperature if do_sample else 1.0,
    )


def _until_eos(responses: torch.Tensor, eos: int | list[int] | None) -> torch.Tensor:
    """1 up to and including each row's first end-of-sequence token, 0 after it."""
    import torch

    if eos is None:
        return torch.ones_like(responses)
    ids = torch.tensor([eos] if isinstance(eos, int) else list(eos))
    is_eos = torch.isin(responses, ids).long()
    ended_before = torch.cumsum(is_eos, dim=1) - is_eos
    return (ended_before == 0).long()
