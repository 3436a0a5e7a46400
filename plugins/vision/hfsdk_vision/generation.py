"""Sampling responses to image prompts with transformers' ``generate`` (``n`` per prompt).

The hfsdk decoder has no vision path, so image prompts are decoded by the model's own
``generate``, which builds the multimodal rotary positions and scatters the image features
itself. Each prompt's row and grid are repeated ``n`` times; its images go through the vision
tower once and the ``n`` samples share those features (transformers' ``mm_encoder_outputs``),
so the tower's work does not grow with ``n``. The result carries the
sampler's own log-probs (from ``generate``'s scores: the sampling temperature, vision tokens
suppressed, no top-k/top-p), so a caller can compare them with a recomputed forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    share_image_encoding: bool = True,
    max_new_tokens: int = 8,
    temperature: float = 1.0,
    do_sample: bool = True,
    generator_seed: int | None = None,
) -> ImageRollout:
    """Sample ``n`` responses to each prompt of ``encoded`` (a :class:`VisionProcessor`
    output) with ``model.generate``; ``generator_seed`` seeds torch's global RNG around the call
    (restored afterwards). ``share_image_encoding``: encode each prompt's images once for its
    ``n`` samples (otherwise every copy's pixels go through the tower). The inputs go to the
    model's device; the result is on the CPU, as ``encoded`` is."""
    import torch

    from hfsdk_backend_common.rollout.hf_rollout import without_model_defaults

    config = model.config
    device = next(model.parameters()).device
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
    ids, mask = input_ids.to(device), attention_mask.to(device)
    with torch.random.fork_rng(enabled=generator_seed is not None):
        if generator_seed is not None:
            torch.manual_seed(generator_seed)
        with torch.no_grad():
            images = _image_inputs(
                model, encoded, rows, pixel_values, grids, share_image_encoding, device
            )
            # The model directory's defaults (a Qwen2-VL-Instruct's repetition_penalty) would
            # otherwise fill every setting not passed here.
            with without_model_defaults(model):
                out = model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    **images,
                    mm_token_type_ids=mm_token_type_ids(ids, config.image_token_id),
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
    log_probs = ((chosen - torch.logsumexp(logits, dim=-1)) * response_mask).cpu()
    response_mask = response_mask.cpu()  # the results on the CPU, as ``encoded`` is
    return ImageRollout(
        input_ids=out.sequences.cpu(),
        attention_mask=torch.cat([attention_mask, response_mask], dim=1),
        responses=responses.cpu(),
        response_mask=response_mask,
        pixel_values=pixel_values,
        image_grid_thw=grids,
        images_per_row=per_row,
        log_probs=log_probs,
        temperature=temperature if do_sample else 1.0,
    )


def _image_inputs(
    model: torch.nn.Module,
    encoded: dict[str, torch.Tensor],
    rows: list[int],
    pixel_values: torch.Tensor,
    grids: torch.Tensor,
    share: bool,
    device: torch.device,
) -> dict[str, Any]:
    """``generate``'s image arguments for the repeated ``rows`` (on ``device``): each distinct
    prompt's images encoded once and their features repeated (``share``), or the repeated
    pixels."""
    if not len(grids):  # a batch without images: the tower must not run on nothing
        return {}
    if not share:
        return {"pixel_values": pixel_values.to(device), "image_grid_thw": grids.to(device)}
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    features = model.model.get_image_features(
        encoded["pixel_values"].to(device), encoded["image_grid_thw"].to(device), return_dict=True
    ).pooler_output
    first = [0, *encoded["images_per_row"].cumsum(0).tolist()]
    repeated = tuple(features[i] for r in rows for i in range(first[r], first[r + 1]))
    return {
        "image_grid_thw": grids.to(device),
        "mm_encoder_outputs": {"image": BaseModelOutputWithPooling(pooler_output=repeated)},
    }


def _until_eos(responses: torch.Tensor, eos: int | list[int] | None) -> torch.Tensor:
    """1 up to and including each row's first end-of-sequence token, 0 after it."""
    import torch

    if eos is None:
        return torch.ones_like(responses)
    ids = torch.tensor([eos] if isinstance(eos, int) else list(eos), device=responses.device)
    is_eos = torch.isin(responses, ids).long()
    ended_before = torch.cumsum(is_eos, dim=1) - is_eos
    return (ended_before == 0).long()
