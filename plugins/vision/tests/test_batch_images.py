"""Images as per-row Batch columns: resampled, chunked and repeated rows keep their images."""

from __future__ import annotations

import pytest
import torch

from hfsdk import Batch, HfsdkError
from hfsdk_vision.batch_images import batch_log_probs, flat_images, rollout_batch
from hfsdk_vision.generation import sample
from hfsdk_vision.tokens import expand_placeholders

from .images import noise_image

ATOL = 2e-5  # as in test_log_probs: a cached decode against one full forward, float32


@pytest.fixture(scope="module")
def batch(vlm) -> Batch:
    model, processor = vlm
    enc = processor(
        [
            expand_placeholders("<image> what colour is the square ?"),
            expand_placeholders("<image> <image> red"),
            expand_placeholders("square"),  # a text-only row among image rows
        ],
        [[noise_image(0)], [noise_image(1, 40, 70), noise_image(2)], []],
    )
    ro = sample(model, enc, n=2, max_new_tokens=4, temperature=0.9, generator_seed=0)
    return rollout_batch(ro, non_tensors={"uid": [0, 0, 1, 1, 2, 2]})


def test_flat_images_round_trip(vlm, batch: Batch) -> None:
    pixels, grids, per_row = flat_images(batch)
    assert per_row.tolist() == [1, 1, 2, 2, 0, 0]
    assert grids.shape == (6, 3) and pixels.shape[0] == int(grids.prod(-1).sum())
    assert batch["pixel_values"].shape[1] == int(grids[2:4].prod(-1).sum())  # widest row


def test_resampled_rows_keep_their_images_and_log_probs(vlm, batch: Batch) -> None:
    """Dynamic sampling keeps some rows in another order; dispatch chunks; a worker pads."""
    model, _ = vlm
    with torch.no_grad():
        full = batch_log_probs(model, batch)
        torch.testing.assert_close(full, batch["rollout_log_probs"], atol=ATOL, rtol=0)
        order = torch.tensor([3, 0, 5, 2])
        resampled = batch.index(order)
        torch.testing.assert_close(
            batch_log_probs(model, resampled), full[order], atol=ATOL, rtol=0
        )
        parts = [batch_log_probs(model, part) for part in batch.chunk(3)]
        torch.testing.assert_close(torch.cat(parts), full, atol=ATOL, rtol=0)
        padded, pad = batch.index(torch.tensor([2, 3])).pad_to_divisor(4)
        assert pad == 2
        torch.testing.assert_close(batch_log_probs(model, padded)[:2], full[2:4], atol=ATOL, rtol=0)
        text_only = batch.index(torch.tensor([4, 5]))  # a micro-batch with no image at all
        torch.testing.assert_close(batch_log_probs(model, text_only), full[4:], atol=ATOL, rtol=0)


def test_rows_whose_images_were_swapped_are_named(vlm, batch: Batch) -> None:
    model, _ = vlm
    broken = batch.index(torch.arange(6))
    # Row 1 (one image) gets row 2's two images: its tokens no longer match its features.
    for key in ("pixel_values", "image_grid_thw", "images_per_row"):
        broken.tensors[key][1] = batch[key][2]
    with pytest.raises(HfsdkError, match=r"^row 1: 4 image tokens in the sequence but its 2"):
        batch_log_probs(model, broken)


def test_a_rank_without_images_concatenates_with_a_rank_with_images(vlm) -> None:
    """Each data-parallel rank encodes its own rows; one that drew no image must still give
    patches of the processor's width, or the ranks' outputs do not concatenate."""
    from hfsdk_vision.batch_images import per_row_images, row_widths

    _, processor = vlm
    ranks = [processor.encode_image_rows([[], []])]
    ranks.append(processor.encode_image_rows([[noise_image(0)], [noise_image(1)]]))
    keys = ("image_grid_thw", "images_per_row")
    widths = max(row_widths(*(r[k] for k in keys)) for r in ranks)
    columns = [per_row_images(r["pixel_values"], *(r[k] for k in keys), widths) for r in ranks]
    assert columns[0]["pixel_values"].shape[-1] == columns[1]["pixel_values"].shape[-1]
    both = Batch.concat([Batch.from_dict(tensors=c) for c in columns])
    assert both["images_per_row"].tolist() == [0, 0, 1, 1]


def test_prompts_left_padded_to_another_ranks_width_sample_and_score_alike(vlm) -> None:
    """A rank's prompts widened to the widest rank's (masked left padding) give the same
    greedy responses, and the recomputed log-probs still equal the sampler's."""
    from hfsdk_vision.rollout import left_padded

    model, processor = vlm
    enc = processor([expand_placeholders("<image> red")], [[noise_image(3)]])
    pad = processor.tokenizer.pad_token_id
    wide = {**enc, **left_padded(enc, enc["input_ids"].shape[1] + 5, pad)}
    assert wide["attention_mask"][0, :5].tolist() == [0] * 5
    plain, padded = (sample(model, e, max_new_tokens=4, do_sample=False) for e in (enc, wide))
    assert torch.equal(padded.responses, plain.responses)
    batch = rollout_batch(padded)
    with torch.no_grad():
        scored = batch_log_probs(model, batch)
    torch.testing.assert_close(scored, batch["rollout_log_probs"], atol=ATOL, rtol=0)
