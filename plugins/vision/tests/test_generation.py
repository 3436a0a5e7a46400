"""n samples per image prompt through transformers' generate."""

from __future__ import annotations

import torch

from hfsdk_vision.generation import sample
from hfsdk_vision.multimodal_inputs import select_rows, vision_token_ids
from hfsdk_vision.tokens import expand_placeholders

from .images import noise_image


def _encoded(processor):
    return processor(
        [
            expand_placeholders("<image> what colour is the square ?"),
            expand_placeholders("<image> <image> red"),
        ],
        [[noise_image(0)], [noise_image(1, 40, 70), noise_image(2)]],
    )


def test_n_samples_per_prompt_carry_their_prompts_images(vlm) -> None:
    model, processor = vlm
    enc = _encoded(processor)
    ro = sample(model, enc, n=3, max_new_tokens=5, generator_seed=1)
    assert ro.responses.shape == (6, 5)
    assert ro.images_per_row.tolist() == [1, 1, 1, 2, 2, 2]
    prompt_width = enc["input_ids"].shape[1]
    for row in range(6):
        assert torch.equal(ro.input_ids[row, :prompt_width], enc["input_ids"][row // 3])
    pixels, grids, _ = select_rows(
        enc["pixel_values"], enc["image_grid_thw"], enc["images_per_row"], [1]
    )
    assert torch.equal(ro.image_grid_thw[-2:], grids)
    assert torch.equal(ro.pixel_values[-pixels.shape[0] :], pixels)
    # sampled, so the three samples of a prompt differ somewhere
    assert len({tuple(r) for r in ro.responses[:3].tolist()}) > 1


def test_responses_never_hold_vision_tokens(vlm) -> None:
    model, processor = vlm
    ro = sample(
        model, _encoded(processor), n=4, max_new_tokens=8, temperature=1.5, generator_seed=2
    )
    assert not torch.isin(ro.responses, torch.tensor(vision_token_ids(model.config))).any()


def test_a_seed_reproduces_the_samples(vlm) -> None:
    model, processor = vlm
    enc = _encoded(processor)
    a = sample(model, enc, n=2, max_new_tokens=5, generator_seed=3)
    b = sample(model, enc, n=2, max_new_tokens=5, generator_seed=3)
    assert torch.equal(a.responses, b.responses)


def test_the_response_mask_ends_at_the_first_eos(vlm) -> None:
    model, processor = vlm
    ro = sample(model, _encoded(processor), n=4, max_new_tokens=8, generator_seed=4)
    eos = model.generation_config.eos_token_id
    for row, mask in zip(ro.responses.tolist(), ro.response_mask.tolist(), strict=True):
        length = row.index(eos) + 1 if eos in row else len(row)
        assert mask == [1] * length + [0] * (len(row) - length)


def test_the_samples_of_a_prompt_share_one_image_encoding(vlm) -> None:
    model, processor = vlm
    enc = _encoded(processor)
    seen: list[int] = []
    hook = model.model.visual.register_forward_pre_hook(
        lambda module, args: seen.append(int(args[0].shape[0]))
    )
    try:
        shared = sample(model, enc, n=3, max_new_tokens=5, generator_seed=5)
        patches = seen.copy()
        seen.clear()
        copied = sample(
            model, enc, n=3, max_new_tokens=5, generator_seed=5, share_image_encoding=False
        )
    finally:
        hook.remove()
    assert patches == [enc["pixel_values"].shape[0]]  # each prompt's patches once
    assert seen == [3 * enc["pixel_values"].shape[0]]  # every copy's patches
    assert torch.equal(shared.responses, copied.responses)
    torch.testing.assert_close(shared.log_probs, copied.log_probs, atol=1e-6, rtol=0)
