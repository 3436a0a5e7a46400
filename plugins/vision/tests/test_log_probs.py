"""Multimodal log-probs: a recomputed forward equals what generation sampled with."""

from __future__ import annotations

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_vision.generation import sample
from hfsdk_vision.log_probs import response_log_probs
from hfsdk_vision.multimodal_inputs import vision_token_ids
from hfsdk_vision.tokens import expand_placeholders

from .images import noise_image

# float32 on CPU: a cached decode step and one full forward reduce in different orders; the
# differences measured were ~2.4e-7 per token (the freshly initialised model is near-uniform,
# so what the tests below must tell apart is ~1e-3: the tolerance stays well under it).
ATOL = 2e-5


@pytest.fixture(scope="module")
def rollout(vlm):
    model, processor = vlm
    # Prompts of different lengths and image counts: the short ones are left-padded.
    enc = processor(
        [
            expand_placeholders("<image> what colour is the square ?"),
            expand_placeholders("<image> <image> red"),
            expand_placeholders("square <image>"),
        ],
        [[noise_image(0)], [noise_image(1, 40, 70), noise_image(2)], [noise_image(3)]],
    )
    assert enc["attention_mask"][:, 0].tolist().count(0) == 2
    return sample(model, enc, n=2, max_new_tokens=6, temperature=0.7, generator_seed=0)


def _recompute(model, ro, **overrides) -> torch.Tensor:
    inputs = {
        "input_ids": ro.input_ids,
        "attention_mask": ro.attention_mask,
        "pixel_values": ro.pixel_values,
        "image_grid_thw": ro.image_grid_thw,
        "images_per_row": ro.images_per_row,
        **overrides,
    }
    with torch.no_grad():
        return response_log_probs(
            model, response_width=ro.responses.shape[1], temperature=ro.temperature, **inputs
        )


def test_recomputed_log_probs_equal_the_samplers(vlm, rollout) -> None:
    model, _ = vlm
    recomputed = _recompute(model, rollout)
    assert rollout.response_mask.sum() > rollout.response_mask.shape[0]  # several tokens each
    torch.testing.assert_close(recomputed, rollout.log_probs, atol=ATOL, rtol=0)
    assert torch.all(rollout.log_probs[rollout.response_mask.bool()] < 0)


def test_the_images_change_the_log_probs(vlm, rollout) -> None:
    model, _ = vlm
    other = _recompute(model, rollout, pixel_values=torch.zeros_like(rollout.pixel_values))
    assert (other - rollout.log_probs).abs().max() > 10 * ATOL


def test_plain_positions_would_not_match(vlm, rollout) -> None:
    """Without the multimodal rotary positions (the text-only 1-D positions a text backend
    passes), the log-probs differ from the sampler's: the test can tell."""
    model, _ = vlm
    mask = rollout.attention_mask
    plain = (mask.cumsum(-1) - 1).clamp(min=0)
    width = rollout.responses.shape[1]
    with torch.no_grad():
        logits = (
            model(
                input_ids=rollout.input_ids,
                attention_mask=mask,
                position_ids=plain,
                pixel_values=rollout.pixel_values,
                image_grid_thw=rollout.image_grid_thw,
                use_cache=False,
            )
            .logits[:, -width - 1 : -1]
            .float()
            / rollout.temperature
        )
    logits[..., vision_token_ids(model.config)] = float("-inf")
    lp = logits.log_softmax(-1).gather(-1, rollout.responses[..., None])[..., 0] * mask[:, -width:]
    assert (lp - rollout.log_probs).abs().max() > 10 * ATOL


def test_gradients_flow_to_the_vision_tower(vlm, rollout) -> None:
    model, _ = vlm
    model.zero_grad()
    lp = response_log_probs(
        model,
        input_ids=rollout.input_ids,
        attention_mask=rollout.attention_mask,
        pixel_values=rollout.pixel_values,
        image_grid_thw=rollout.image_grid_thw,
        images_per_row=rollout.images_per_row,
        response_width=rollout.responses.shape[1],
    )
    lp.sum().backward()
    grad = model.model.visual.patch_embed.proj.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    model.zero_grad()


def test_a_truncated_prompt_is_refused_before_the_forward(vlm, rollout) -> None:
    model, _ = vlm
    cut = rollout.attention_mask.clone()
    row = 3
    first_image = int((rollout.input_ids[row] == model.config.image_token_id).nonzero()[0])
    cut[row, first_image] = 0
    with pytest.raises(HfsdkError, match=rf"^row {row}: "):
        _recompute(model, rollout, attention_mask=cut)
