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


def test_inputs_go_to_the_models_device_and_results_come_back(vlm_dir) -> None:
    """A model on another device than the processor's CPU outputs (``meta`` stands in for
    CUDA: it refuses to mix with CPU tensors as CUDA does): the tower and ``generate`` get
    their inputs on the model's device, and the results are moved back to the CPU."""
    import types

    import pytest

    from hfsdk_vision.model import load_tiny_vlm

    model, processor = load_tiny_vlm(vlm_dir)  # a fresh copy: the shared one stays on the CPU
    model = model.to("meta")
    enc = _encoded(processor)
    vocab = model.config.text_config.vocab_size
    seen: list[tuple[str, torch.device]] = []

    def tower(pixels, grid_thw, **_):  # meta holds no data: record where the inputs are
        seen.extend([("tower pixels", pixels.device), ("tower grid", grid_thw.device)])
        return types.SimpleNamespace(pooler_output=(torch.zeros(3, 8, device="meta"),) * 3)

    def generate(out_device):
        def run(input_ids, attention_mask, max_new_tokens, **kwargs):
            seen.extend([("ids", input_ids.device), ("mask", attention_mask.device)])
            seen.extend((k, v.device) for k, v in kwargs.items() if torch.is_tensor(v))
            rows = input_ids.shape[0]
            new = torch.full((rows, max_new_tokens), 5, device=out_device)
            return types.SimpleNamespace(
                sequences=torch.cat([torch.ones_like(input_ids, device=out_device), new], 1),
                scores=tuple(torch.zeros(rows, vocab, device=out_device) for _ in new.T),
            )

        return run

    model.model.get_image_features = tower
    model.generate = generate("cpu")
    for share, pixels in ((True, "tower pixels"), (False, "pixel_values")):
        seen.clear()
        ro = sample(model, enc, n=2, max_new_tokens=3, share_image_encoding=share)
        assert {name for name, _ in seen} >= {"ids", "mask", "image_grid_thw", pixels}
        assert all(device.type == "meta" for _, device in seen), seen
        assert ro.responses.shape == (4, 3) and ro.log_probs.device.type == "cpu"
    model.generate = generate("meta")  # what the device gives back is copied off it
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta"):
        sample(model, enc, n=2, max_new_tokens=3, share_image_encoding=False)
